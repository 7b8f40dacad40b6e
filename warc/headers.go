package warc

// WARC header fields of pab's own, in every response record pab writes (WARC 1.1 section
// 5 allows extension fields; docs/bundle-format.md "archive/data.warc"). The record
// journal of pab record writes the same names.
const (
	// HeaderExchangeID is the exchange's id, shared by its request and response records
	// (entries.jsonl "id").
	HeaderExchangeID = "RR-Exchange-Id"
	// HeaderResourceType is the browser's resource type of the request ("document",
	// "image", "script", ...; entries.jsonl "type").
	HeaderResourceType = "RR-Resource-Type"
	// HeaderOriginalContentEncoding is the Content-Encoding the server sent ("br", "gzip")
	// when the stored payload was decoded from it.
	HeaderOriginalContentEncoding = "RR-Original-Content-Encoding"
	// HeaderPayloadNote is a note of the import on the stored payload, one field each, on
	// the response record that holds it (bundle-format.md "Payload framing"): one of
	// package recording's Note* texts, then for some ": " and details.
	HeaderPayloadNote = "RR-Payload-Note"
)

// Size bounds of the heads inside a record; every WARC read is treated as hostile.
const (
	// MaxWARCHeaderBytes bounds the WARC header of one record (WARC 1.1 section 4).
	MaxWARCHeaderBytes = 64 << 10
	// MaxHTTPHeaderBytes bounds the HTTP status line and header fields inside a record block.
	MaxHTTPHeaderBytes = 1 << 20
)
