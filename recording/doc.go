// Package recording is pab's recording of a task, built on package warc: the bundle
// directory (manifest.json, archive/data.warc, indexes/entries.jsonl, pages/pages.jsonl)
// and the published recording (format 3: warc data parts, entries.jsonl.gz,
// manifest.json, pages.jsonl, read in place; docs/bundle-format.md), with the entry table
// that a saved index carries.
//
// It imports WARC and WACZ files from other tools into a bundle (ImportWARCs: streamed,
// the pairing of requests and responses, revisits, the framing repairs), writes bundles
// (BundleWriter), merges, audits (Audit, AuditRecording, AuditWARCFile), packs,
// publishes and unpacks recordings within size limits, migrates older formats, exports
// standard WARC 1.1 and WACZ 1.1.1 (with a CDXJ index), and opens a recording for replay
// (OpenBundle), where a response is read by offset without loading the archive.
// Everything read from outside is treated as hostile: sizes are bounded and errors name
// the file and offset.
package recording
