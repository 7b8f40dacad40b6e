package replay

import (
	"mime"
	"net/http"
	"path"
	"strings"
)

// Request types, as written in the log's "type" field and counted by /stats.
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

// RequestType classifies a request by what the client will do with the answer, in this
// order: the Sec-Fetch-Dest header (Fetch Metadata, https://w3c.github.io/webappsec-fetch-metadata/),
// else X-Requested-With: XMLHttpRequest, else the Accept header, else the URL path's
// extension. A path with no extension (or ending in "/") is a document. The result is
// one of the Type* constants other than TypeTracker, which only the block rules decide.
func RequestType(r *http.Request) string {
	if t := typeFromDest(r.Header.Get("Sec-Fetch-Dest")); t != "" {
		return t
	}
	if strings.EqualFold(r.Header.Get("X-Requested-With"), "XMLHttpRequest") {
		return TypeAPI
	}
	if t := typeFromAccept(r.Header.Get("Accept")); t != "" {
		return t
	}
	p := ""
	if r.URL != nil {
		p = r.URL.Path
	}
	return typeFromPath(p)
}

func typeFromDest(dest string) string {
	switch strings.ToLower(strings.TrimSpace(dest)) {
	case "document", "iframe", "frame", "fencedframe":
		return TypeDocument
	case "image":
		return TypeImage
	case "font":
		return TypeFont
	case "style":
		return TypeStyle
	case "script", "worker", "sharedworker", "serviceworker", "audioworklet", "paintworklet", "xslt":
		return TypeScript
	case "json":
		return TypeAPI
	case "audio", "video", "track":
		return TypeMedia
	case "empty":
		// fetch(), XMLHttpRequest, sendBeacon, EventSource.
		return TypeAPI
	case "":
		return ""
	default:
		// manifest, object, embed, report, webidentity, ...
		return TypeOther
	}
}

// typeFromAccept looks at the first media range of Accept that says something; "*/*"
// alone says nothing and leaves the decision to the extension.
func typeFromAccept(accept string) string {
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch {
		case mt == "text/html" || mt == "application/xhtml+xml":
			return TypeDocument
		case mt == "text/css":
			return TypeStyle
		case strings.Contains(mt, "javascript") || mt == "text/ecmascript" || mt == "application/ecmascript":
			return TypeScript
		case mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/event-stream":
			return TypeAPI
		case strings.HasPrefix(mt, "image/"):
			return TypeImage
		case strings.HasPrefix(mt, "font/") || strings.HasPrefix(mt, "application/font-"):
			return TypeFont
		case strings.HasPrefix(mt, "video/") || strings.HasPrefix(mt, "audio/"):
			return TypeMedia
		}
	}
	return ""
}

var extTypes = map[string]string{
	".html": TypeDocument, ".htm": TypeDocument, ".xhtml": TypeDocument, ".php": TypeDocument,
	".asp": TypeDocument, ".aspx": TypeDocument, ".jsp": TypeDocument, ".shtml": TypeDocument, ".cgi": TypeDocument,
	".png": TypeImage, ".jpg": TypeImage, ".jpeg": TypeImage, ".gif": TypeImage, ".webp": TypeImage,
	".svg": TypeImage, ".ico": TypeImage, ".avif": TypeImage, ".bmp": TypeImage, ".tif": TypeImage, ".tiff": TypeImage,
	".woff": TypeFont, ".woff2": TypeFont, ".ttf": TypeFont, ".otf": TypeFont, ".eot": TypeFont,
	".css": TypeStyle,
	".js":  TypeScript, ".mjs": TypeScript, ".cjs": TypeScript,
	".json": TypeAPI,
	".mp4":  TypeMedia, ".webm": TypeMedia, ".mp3": TypeMedia, ".ogg": TypeMedia, ".wav": TypeMedia,
	".m4a": TypeMedia, ".m4v": TypeMedia, ".mov": TypeMedia, ".m3u8": TypeMedia, ".vtt": TypeMedia, ".flac": TypeMedia,
}

func typeFromPath(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return TypeDocument
	}
	ext := strings.ToLower(path.Ext(p))
	if ext == "" {
		return TypeDocument
	}
	if t, ok := extTypes[ext]; ok {
		return t
	}
	return TypeOther
}
