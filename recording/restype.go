package recording

import (
	"mime"
	"net/http"
	"path"
	"strings"
)

// This file is the one classification of an exchange by what the browser does with the
// answer: the resource type written as RR-Resource-Type and the entry's "type". Import,
// record and replay's request type (replay.RequestType, the log's vocabulary) all classify
// with it.

// Resource types, as RR-Resource-Type and the entry "type" hold them: the Chrome DevTools
// Protocol's Network.ResourceType names in lower case, the vocabulary of browser-driven
// crawlers' WARCs (https://chromedevtools.github.io/devtools-protocol/tot/Network/#type-ResourceType).
// A recording made by pab record before 2026-12 may hold "style" and "api" for stylesheet
// and fetch; readers accept both (replay.TypeOf).
const (
	ResourceDocument   = "document"   // a page or frame
	ResourceStylesheet = "stylesheet" // CSS
	ResourceScript     = "script"     // JavaScript, workers
	ResourceImage      = "image"
	ResourceFont       = "font"
	ResourceMedia      = "media"    // audio, video, subtitles
	ResourceFetch      = "fetch"    // fetch(), XMLHttpRequest, JSON, event streams
	ResourceManifest   = "manifest" // a web app manifest
	ResourceOther      = "other"
)

// ResourceTypeFromDest maps a Sec-Fetch-Dest value (Fetch Metadata,
// https://w3c.github.io/webappsec-fetch-metadata/) to a resource type: "" when dest is
// empty, ResourceOther for a destination with no type of its own (object, embed, report,
// ...).
func ResourceTypeFromDest(dest string) string {
	switch strings.ToLower(strings.TrimSpace(dest)) {
	case "":
		return ""
	case "document", "iframe", "frame", "fencedframe":
		return ResourceDocument
	case "style":
		return ResourceStylesheet
	case "script", "worker", "sharedworker", "serviceworker", "audioworklet", "paintworklet", "xslt":
		return ResourceScript
	case "image":
		return ResourceImage
	case "font":
		return ResourceFont
	case "audio", "video", "track":
		return ResourceMedia
	case "manifest":
		return ResourceManifest
	case "json", "empty": // "empty": fetch(), XMLHttpRequest, sendBeacon, EventSource
		return ResourceFetch
	default:
		return ResourceOther
	}
}

// The media types of a request's Accept header and of a response's Content-Type are two
// signals, each with its own mapping below: an Accept range names what the client asks
// for, a Content-Type what a server sent (legacy font types, any JSON or XML answer). They
// differ where a change would alter which recording replay answers with, or what an import
// writes, so each is kept as it was.

// ResourceTypeFromMime maps a response's media type without parameters ("text/css", as
// mime.ParseMediaType gives it) to a resource type, or "" when the type says nothing of one
// (application/octet-stream, text/plain, ...). Any type naming json, and any .../xml, is
// ResourceFetch.
func ResourceTypeFromMime(mt string) string {
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return ResourceDocument
	case mt == "text/css":
		return ResourceStylesheet
	case strings.Contains(mt, "javascript") || mt == "text/ecmascript":
		return ResourceScript
	case strings.HasPrefix(mt, "image/"):
		return ResourceImage
	case strings.HasPrefix(mt, "font/") || strings.Contains(mt, "font-woff") || mt == "application/vnd.ms-fontobject":
		return ResourceFont
	case strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/"):
		return ResourceMedia
	case strings.Contains(mt, "json") || strings.HasSuffix(mt, "/xml"):
		return ResourceFetch
	}
	return ""
}

// ResourceTypeFromAccept maps one media range of a request's Accept header, without
// parameters, to the resource type the client asks for, or "" when it names none ("*/*",
// text/plain, XML, ...): only application/json, +json types and text/event-stream are
// ResourceFetch. Replay also tells a recorded static file by it (replay.StaticType).
func ResourceTypeFromAccept(mt string) string {
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return ResourceDocument
	case mt == "text/css":
		return ResourceStylesheet
	case strings.Contains(mt, "javascript") || mt == "text/ecmascript" || mt == "application/ecmascript":
		return ResourceScript
	case mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/event-stream":
		return ResourceFetch
	case strings.HasPrefix(mt, "image/"):
		return ResourceImage
	case strings.HasPrefix(mt, "font/") || strings.HasPrefix(mt, "application/font-"):
		return ResourceFont
	case strings.HasPrefix(mt, "video/") || strings.HasPrefix(mt, "audio/"):
		return ResourceMedia
	}
	return ""
}

// RequestResourceType classifies a request by its header and URL path alone, in this order:
// Sec-Fetch-Dest, else X-Requested-With: XMLHttpRequest (ResourceFetch), else the first
// media range of Accept that names a type ("*/*" names none), else the path's extension
// (ResourceTypeFromPath). It is what pab record stores and what replay's request type is
// made of.
func RequestResourceType(h http.Header, urlPath string) string {
	if t := ResourceTypeFromDest(firstValue(h, "Sec-Fetch-Dest")); t != "" {
		return t
	}
	if strings.EqualFold(firstValue(h, "X-Requested-With"), "XMLHttpRequest") {
		return ResourceFetch
	}
	for accept := firstValue(h, "Accept"); accept != ""; {
		var part string
		part, accept, _ = strings.Cut(accept, ",")
		if mt, ok := acceptMediaType(strings.TrimSpace(part)); ok {
			if t := ResourceTypeFromAccept(mt); t != "" {
				return t
			}
		}
	}
	return ResourceTypeFromPath(urlPath)
}

// acceptMediaType returns the media type of one media range of an Accept value (RFC 9110
// section 12.5.1), trimmed, as mime.ParseMediaType gives it, and whether ParseMediaType
// accepts the range. A range without parameters ("image/webp", "*/*") is read here, without
// the map ParseMediaType makes: this runs for every request replay answers; any other range
// goes through ParseMediaType. FuzzAcceptMediaType compares the two.
func acceptMediaType(part string) (string, bool) {
	slash := -1
	for i := 0; i < len(part); i++ {
		c := part[i]
		if c == '/' && slash < 0 && i > 0 && i < len(part)-1 {
			slash = i
			continue
		}
		if !mediaTokenByte[c] {
			mt, _, err := mime.ParseMediaType(part)
			return mt, err == nil
		}
	}
	if part == "" {
		return "", false
	}
	return strings.ToLower(part), true
}

// mediaTokenByte says which bytes make up a token of a media type (RFC 9110 section 5.6.2,
// as mime.ParseMediaType reads it): visible ASCII but the separators.
var mediaTokenByte = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		t[c] = !strings.ContainsRune(`()<>@,;:\"/[]?=`, rune(c))
	}
	return t
}()

// firstValue is h.Get(key) for a key already in canonical form (CanonicalHeaderKey), without
// canonicalizing it again: it runs on every request replay answers.
func firstValue(h http.Header, key string) string {
	if vs := h[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// ResourceTypeFromPath classifies a URL path by its extension: a path with no extension
// (or ending in "/") is a document, an unknown extension is ResourceOther.
func ResourceTypeFromPath(urlPath string) string {
	if urlPath == "" || strings.HasSuffix(urlPath, "/") {
		return ResourceDocument
	}
	ext := strings.ToLower(path.Ext(urlPath))
	if ext == "" {
		return ResourceDocument
	}
	if t, ok := extTypes[ext]; ok {
		return t
	}
	return ResourceOther
}

var extTypes = map[string]string{
	".html": ResourceDocument, ".htm": ResourceDocument, ".xhtml": ResourceDocument, ".php": ResourceDocument,
	".asp": ResourceDocument, ".aspx": ResourceDocument, ".jsp": ResourceDocument, ".shtml": ResourceDocument, ".cgi": ResourceDocument,
	".png": ResourceImage, ".jpg": ResourceImage, ".jpeg": ResourceImage, ".gif": ResourceImage, ".webp": ResourceImage,
	".svg": ResourceImage, ".ico": ResourceImage, ".avif": ResourceImage, ".bmp": ResourceImage, ".tif": ResourceImage, ".tiff": ResourceImage,
	".woff": ResourceFont, ".woff2": ResourceFont, ".ttf": ResourceFont, ".otf": ResourceFont, ".eot": ResourceFont,
	".css": ResourceStylesheet,
	".js":  ResourceScript, ".mjs": ResourceScript, ".cjs": ResourceScript,
	".json": ResourceFetch,
	".mp4":  ResourceMedia, ".webm": ResourceMedia, ".mp3": ResourceMedia, ".ogg": ResourceMedia, ".wav": ResourceMedia,
	".m4a": ResourceMedia, ".m4v": ResourceMedia, ".mov": ResourceMedia, ".m3u8": ResourceMedia, ".vtt": ResourceMedia, ".flac": ResourceMedia,
}
