// Package warc reads and writes WARC files (ISO 28500, WARC 1.0 and 1.1) on top of
// github.com/nlnwa/gowarc, and pab's recording bundle built from them
// (docs/bundle-format.md): a bundle directory (manifest.json, archive/data.warc,
// indexes/entries.jsonl, pages/pages.jsonl) and the published, packed recording of a task
// (recording/: warc.tar.gz, entries.jsonl.gz, manifest.json, pages.jsonl).
//
// It imports WARC and WACZ files from other tools, tolerating the damage real captures
// carry (wrong Content-Length, CR CR LF lines, cut chunked bodies; see warc/resync.go and
// the payload framing rules F1–F5), merges, audits, packs and unpacks recordings within
// size limits, exports standard WARC and WACZ 1.1.1, and opens a bundle for replay, where
// a response is read by offset without loading the archive. Everything read from outside
// is treated as hostile: sizes are bounded and errors name the file and offset.
package warc
