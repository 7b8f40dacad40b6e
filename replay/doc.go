// Package replay serves a recording offline: the lookup Index (a pure, deterministic
// function from a request to a recorded exchange, in the order blocked, exact, search,
// promo, fuzzy, miss, with every refusal explained), the replay Server (an http.Handler
// that answers only from the recording, run behind the MITM shell of internal/mitm), page
// clocks, 304 revalidation, miss answers by resource type, the JSONL request log and its
// readers, hit-rate statistics and the self-check (docs/replay.md).
//
// Replay prefers a miss to a wrong answer: a heuristic answer (search, promo, fuzzy) is
// given only where the matching policy allows it, and it is named in the log and in
// pab inspect.
package replay
