// Package warc reads and writes the WARC file format (ISO 28500; WARC 1.0 and 1.1) on top
// of github.com/nlnwa/gowarc, for any program that handles web archives: records read one
// by one from plain or gzip files (Reader, Record; WARC 1.1 section 4), their header
// fields and heads (ReadHead, ParseWARCHead), the HTTP messages in their blocks
// (ParseHTTP), block and payload digests (Digest; WARC 1.1 section 5.8/5.9), payload
// decoding (DecodePayload: chunked transfer coding, RFC 9112 section 7.1, and content
// codings), and one record written back (EncodeRecord).
//
// It tolerates the damage real captures carry: a wrong Content-Length (resync.go:
// resynchronising on the next "WARC/" line), CR CR LF line ends, cut gzip members, cut or
// malformed chunked bodies (the payload framing rules F1–F5 of docs/bundle-format.md).
// Everything read is treated as hostile: sizes are bounded (MaxWARCHeaderBytes,
// MaxHTTPHeaderBytes, DefaultMaxBlockSize) and errors name the file and offset.
//
// pab's recording of a task (the bundle, its published layout, import, merge, audit,
// export) is package recording, built on this one; warc imports nothing of pab's.
package warc
