package recording

// RR-Payload-Note texts (warc.HeaderPayloadNote): replay adds the notes that
// start with NoteServedAsRecorded to the log line of every answer with that payload; pab
// audit reports NoteChunkedKept.
const (
	// NoteServedAsRecorded starts the notes of a payload served as recorded although a
	// browser would have shown something else.
	NoteServedAsRecorded = "served as recorded"
	// NoteChunkedKept: the body said chunked and started as chunks, but its framing
	// breaks off; it is stored with its chunk-size lines (rule F6).
	NoteChunkedKept = NoteServedAsRecorded + ": chunked framing that breaks off, chunk-size lines included"
	// NoteLongerThanLength: an HTML payload longer than its recorded Content-Length (a
	// capture of the page's DOM rather than of the bytes sent), kept whole (rule F1);
	// ": N bytes, Content-Length M" follows.
	NoteLongerThanLength = NoteServedAsRecorded + ": HTML longer than its recorded Content-Length"
	// NoteDechunkedLeniently: the chunked framing was removed as a browser reads it,
	// beyond RFC 9112's grammar (rule F2); ": " and what (warc.ChunkDecoder.Repairs) follows.
	NoteDechunkedLeniently = "de-chunked as a browser reads it"
)
