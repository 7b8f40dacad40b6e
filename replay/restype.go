package replay

import (
	"net/http"

	"github.com/pab-dev/pab/recording"
)

// Request types, as written in the log's "type" field and counted by /stats: the
// recording's resource types (warc.Resource*) under the log's shorter names.
const (
	TypeDocument = "document" // a page or frame
	TypeImage    = "image"
	TypeFont     = "font"
	TypeStyle    = "style"  // CSS
	TypeScript   = "script" // JavaScript, workers
	TypeAPI      = "api"    // fetch or XHR, JSON
	TypeMedia    = "media"  // audio, video, subtitles
	TypeOther    = "other"
	TypeTracker  = "tracker" // decided by the block rules, not by the request
)

// RequestType classifies a request by what the client will do with the answer:
// recording.RequestResourceType (Sec-Fetch-Dest, else X-Requested-With, else Accept, else the
// URL path's extension) under its log name. The result is one of the Type* constants other
// than TypeTracker, which only the block rules decide.
func RequestType(r *http.Request) string {
	p := ""
	if r.URL != nil {
		p = r.URL.Path
	}
	return TypeOf(recording.RequestResourceType(r.Header, p))
}

// TypeOf is the log name of a resource type (warc.Resource*, or the "style" and "api" that
// older pab recordings hold): stylesheet is TypeStyle, fetch and xhr are TypeAPI, a type
// with no log name of its own (manifest, ping, ...) is TypeOther.
func TypeOf(resourceType string) string {
	switch resourceType {
	case recording.ResourceDocument, recording.ResourceImage, recording.ResourceFont, recording.ResourceScript, recording.ResourceMedia:
		return resourceType
	case recording.ResourceStylesheet, TypeStyle:
		return TypeStyle
	case recording.ResourceFetch, "xhr", "eventsource", TypeAPI:
		return TypeAPI
	}
	return TypeOther
}
