package recording

// This file holds the bundle's small formats (seed layout, see docs/bundle-format.md):
// manifest.json, indexes/entries.jsonl and pages/pages.jsonl.

// Paths of the bundle's files, relative to the bundle directory.
const (
	ManifestFile = "manifest.json"
	WARCFile     = "archive/data.warc"
	EntriesFile  = "indexes/entries.jsonl"
	PagesFile    = "pages/pages.jsonl"
)

// RecordingFormat is the published layout version this build writes
// (tasks/<id>/recording/manifest.json "format"): format 3, read in place (one gzip member
// per WARC record in data.warc.gz). See docs/bundle-format.md.
const RecordingFormat = 3

// RecordingFormat2 is the previous published layout (warc.tar.gz), which this build still
// reads by unpacking it into the cache, and which `pab recording migrate` converts to
// RecordingFormat.
const RecordingFormat2 = 2

// Manifest is manifest.json: the few facts replay needs about a recording.
// Timestamps are RFC 3339 in UTC with milliseconds ("2026-10-22T10:40:57.458Z").
type Manifest struct {
	// TaskID names the tasks/<id>/ directory the recording belongs to.
	TaskID string `json:"task_id"`
	// CapturedFrom is the WARC-Date of the first exchange; page clocks start here.
	CapturedFrom string `json:"captured_from"`
	// CapturedTo is the WARC-Date of the last exchange.
	CapturedTo string `json:"captured_to"`
	// NotFound maps a site name (a host) to the URL of a recorded 404 page of that site,
	// served for documents replay cannot find.
	NotFound map[string]string `json:"not_found,omitempty"`
	// Locale is the browser language while recording, e.g. "en-US".
	Locale string `json:"locale,omitempty"`
	// Timezone is an IANA zone name, e.g. "America/New_York".
	Timezone string `json:"timezone,omitempty"`
	// Format is the published layout version; only set in recording/manifest.json.
	Format int `json:"format,omitempty"`
}

// Entry is one line of indexes/entries.jsonl: one recorded HTTP exchange and where its two
// WARC records sit in archive/data.warc. Offsets and lengths are in bytes from the start of
// the file; a length covers the whole record (header, block and the trailing CRLF CRLF).
type Entry struct {
	// ID is the exchange id, also written as the RR-Exchange-Id WARC header ("e000123").
	ID string `json:"id"`
	// TS is the response record's WARC-Date (RFC 3339, UTC, milliseconds).
	TS     string `json:"ts"`
	Method string `json:"method"`
	// URL is the WARC-Target-URI as recorded (absolute, with scheme).
	URL    string `json:"url"`
	Status int    `json:"status"`
	// Mime is the response Content-Type without parameters ("text/html").
	Mime string `json:"mime,omitempty"`
	// Digest is the lowercase hex sha256 of the decoded payload.
	Digest string `json:"digest,omitempty"`
	// Size is the decoded payload length in bytes.
	Size       int64 `json:"size"`
	ReqOffset  int64 `json:"reqOffset"`
	ReqLength  int64 `json:"reqLength"`
	RespOffset int64 `json:"respOffset"`
	RespLength int64 `json:"respLength"`
	// ReqBody is the request body, base64 (standard encoding); empty for bodiless requests.
	ReqBody string `json:"reqBody,omitempty"`
	// ReqType is the request's Content-Type, used to normalize ReqBody for matching.
	ReqType string `json:"reqType,omitempty"`
	// RevisitOf is the ID of the exchange holding the payload when this response is a
	// revisit record (WARC 1.1 section 6.7.2, identical-payload-digest).
	RevisitOf string `json:"revisitOf,omitempty"`
	// Unresolved marks a revisit whose original payload is not in the recording: replay
	// answers it as a miss and says so in its log.
	Unresolved bool `json:"unresolved,omitempty"`
	// ResourceType is the RR-Resource-Type WARC header ("document", "image", "script", ...).
	ResourceType string `json:"type,omitempty"`

	// Only in a published recording of format 3 (entries.jsonl.gz), never in a bundle
	// directory: where the gzip member holding each record sits in data.warc.gz or its
	// parts (WARC 1.1 Annex D, one member per record). RespPart and ReqPart are the part
	// numbers (0 for data.warc.gz itself); the offsets and lengths are in bytes of the
	// compressed part file, from the member's first header byte through its 8-byte
	// trailer. The member inflates to exactly the record's RespLength (ReqLength) bytes.
	// ReqGzLength is 0 exactly when ReqLength is 0.
	RespPart     int   `json:"respPart,omitempty"`
	RespGzOffset int64 `json:"respGzOffset,omitempty"`
	RespGzLength int64 `json:"respGzLength,omitempty"`
	ReqPart      int   `json:"reqPart,omitempty"`
	ReqGzOffset  int64 `json:"reqGzOffset,omitempty"`
	ReqGzLength  int64 `json:"reqGzLength,omitempty"`
}

// Page is one line of pages/pages.jsonl: a top-level document visited while recording,
// in visit order.
type Page struct {
	URL string `json:"url"`
	TS  string `json:"ts"`
	// Fetched says how the address was reached: "GET", "POST" or "none" (set by page script).
	Fetched string `json:"fetched"`
	Title   string `json:"title,omitempty"`
	// Note is "not-found-probe" for the visit made to record a site's own 404 page.
	Note string `json:"note,omitempty"`
}
