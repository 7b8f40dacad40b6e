package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// encodingJSONLine is an entry's line as encoding/json writes it (SetEscapeHTML(false)).
func encodingJSONLine(t testing.TB, e *Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameEntryLine checks that writeJSONLine writes e as encoding/json does, into a buffered
// writer (the import's case) and into a bytes.Buffer, and reports whether appendEntryJSON
// wrote it (all its strings plain).
func sameEntryLine(t testing.TB, e *Entry) bool {
	t.Helper()
	want := encodingJSONLine(t, e)
	var direct bytes.Buffer
	if err := writeJSONLine(&direct, e); err != nil {
		t.Fatal(err)
	}
	var buffered bytes.Buffer
	bw := bufio.NewWriterSize(&buffered, 64) // smaller than most lines: AvailableBuffer grows
	if err := writeJSONLine(bw, e); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(direct.Bytes(), want) || !bytes.Equal(buffered.Bytes(), want) {
		t.Fatalf("entry %+v:\n got %s\n and %s\nwant %s", e, direct.Bytes(), buffered.Bytes(), want)
	}
	_, fast := appendEntryJSON(nil, e)
	return fast
}

// TestEntryJSONSameBytes: an entries.jsonl line written without reflection is byte for byte
// encoding/json's, for entries with every field empty, zero, negative or large, and strings
// that are plain or not (quotes, backslashes, control bytes, '<', '>', '&', non-ASCII and
// invalid UTF-8, U+2028), which are left to encoding/json; the lines of a shipped task's
// recording are among them.
func TestEntryJSONSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	strs := []string{"", "e000001", "https://www.example.test/a?b=c&d=<e>", "GET", "text/html", "2026-03-01T09:00:00.000Z",
		"a\"quote", "back\\slash", "tab\there", "line\nbreak", "\x00\x1f\x7f", "caf\u00e9", "\xff\xfe", "\u2028", "plain text"}
	num := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return -rng.Int64N(1000)
		case 2:
			return rng.Int64()
		}
		return rng.Int64N(100000)
	}
	s := func() string { return strs[rng.IntN(len(strs))] }
	fast, slow := 0, 0
	for range 5000 {
		e := Entry{ID: s(), TS: s(), Method: s(), URL: s(), Status: int(num()), Mime: s(), Digest: s(), Size: num(),
			ReqOffset: num(), ReqLength: num(), RespOffset: num(), RespLength: num(), ReqBody: s(), ReqType: s(),
			RevisitOf: s(), Unresolved: rng.IntN(2) == 0, ResourceType: s(), RespPart: int(num()), RespGzOffset: num(),
			RespGzLength: num(), ReqPart: int(num()), ReqGzOffset: num(), ReqGzLength: num()}
		if sameEntryLine(t, &e) {
			fast++
		} else {
			slow++
		}
	}
	sameEntryLine(t, &Entry{})
	if fast == 0 || slow == 0 {
		t.Fatalf("%d lines without reflection, %d with: want both", fast, slow)
	}
	// the entries of the shipped tasks' recordings: pab's own lines, real URLs
	recs, err := filepath.Glob(filepath.Join("..", "tasks", "*", "recording"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("no shipped recordings: %v", err)
	}
	lines, plain := 0, 0
	for _, dir := range recs {
		b, err := OpenBundle(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Entries {
			lines++
			if sameEntryLine(t, &b.Entries[i]) {
				plain++
			}
		}
		b.Close()
	}
	if plain < lines*9/10 {
		t.Errorf("%d of %d lines of the shipped recordings written without reflection", plain, lines)
	}
	t.Logf("%d of %d lines of the shipped recordings written without reflection", plain, lines)
}

// FuzzEntryJSON: whatever its strings and numbers, an entry's line is encoding/json's.
func FuzzEntryJSON(f *testing.F) {
	f.Add("e000001", "https://a.test/x?y=1", "text/html", "ab\"c", int64(200), int64(0), true)
	f.Add("", "\u2028", "\xff", "<&>", int64(-1), int64(1<<62), false)
	f.Fuzz(func(t *testing.T, id, url, mime, body string, n, m int64, unresolved bool) {
		e := Entry{ID: id, TS: body, Method: mime, URL: url, Status: int(n), Mime: mime, Digest: id, Size: m, ReqOffset: n,
			ReqLength: m, RespOffset: -n, RespLength: n ^ m, ReqBody: body, ReqType: mime, RevisitOf: url,
			Unresolved: unresolved, ResourceType: id, RespPart: int(m), RespGzOffset: n, RespGzLength: m, ReqPart: int(n),
			ReqGzOffset: m, ReqGzLength: n}
		sameEntryLine(t, &e)
	})
}
