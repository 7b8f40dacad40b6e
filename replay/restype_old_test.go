package replay

import (
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
)

// FuzzRequestTypeUnchanged: RequestType, now made of recording.RequestResourceType, gives every
// request the type the replay classification of pab before it (oldRequestType, kept here as
// it was at commit 5d984c7) gave: the log's type and the miss answers did not change.
func FuzzRequestTypeUnchanged(f *testing.F) {
	for _, s := range [][4]string{
		{"document", "", "", "/x.png"}, {"empty", "", "text/html", "/"}, {"json", "", "", "/"},
		{"manifest", "", "", "/m"}, {"object", "", "", "/o"}, {"", "XMLHttpRequest", "", "/"},
		{"", "", "application/xml", "/feed"}, {"", "", "text/xml", "/a.css"}, {"", "", "application/x-font-woff", "/f"},
		{"", "", "text/json", "/"}, {"", "", "application/vnd.api+json", "/"}, {"", "", "*/*", "/a.JS"},
		{"", "", "text/event-stream", "/s"}, {"", "", "garbage;;;", "/a.gif"}, {"", "", "", ""}, {" Style ", "", "", "/"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, dest, xrw, accept, p string) {
		r := &http.Request{Header: http.Header{}, URL: nil}
		if dest != "" {
			r.Header.Set("Sec-Fetch-Dest", dest)
		}
		if xrw != "" {
			r.Header.Set("X-Requested-With", xrw)
		}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		for _, withURL := range []bool{false, true} {
			if withURL {
				r.URL = &url.URL{Path: p}
			}
			if got, want := RequestType(r), oldRequestType(r); got != want {
				t.Fatalf("dest %q xrw %q accept %q path %q (URL %v): %s, before %s", dest, xrw, accept, p, withURL, got, want)
			}
		}
	})
}

func oldRequestType(r *http.Request) string {
	if t := oldTypeFromDest(r.Header.Get("Sec-Fetch-Dest")); t != "" {
		return t
	}
	if strings.EqualFold(r.Header.Get("X-Requested-With"), "XMLHttpRequest") {
		return TypeAPI
	}
	if t := oldTypeFromAccept(r.Header.Get("Accept")); t != "" {
		return t
	}
	p := ""
	if r.URL != nil {
		p = r.URL.Path
	}
	return oldTypeFromPath(p)
}

func oldTypeFromDest(dest string) string {
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

// oldTypeFromAccept looks at the first media range of Accept that says something; "*/*"
// alone says nothing and leaves the decision to the extension.
func oldTypeFromAccept(accept string) string {
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

var oldExtTypes = map[string]string{
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

func oldTypeFromPath(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return TypeDocument
	}
	ext := strings.ToLower(path.Ext(p))
	if ext == "" {
		return TypeDocument
	}
	if t, ok := oldExtTypes[ext]; ok {
		return t
	}
	return TypeOther
}
