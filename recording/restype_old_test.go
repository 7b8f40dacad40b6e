package recording

import (
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/pab-dev/pab/warc"
)

// FuzzImportResourceTypeUnchanged: an import's resource type, now made of
// ResourceTypeFromDest and ResourceTypeFromMime, is the one pab gave before them
// (oldResourceType, kept here as it was at commit 5d984c7), but for the destinations the
// one classification added (json, fencedframe, the worklets, xslt) and a Sec-Fetch-Dest
// with spaces around it, which now take their destination's type.
func FuzzImportResourceTypeUnchanged(f *testing.F) {
	for _, s := range [][3]string{
		{"", "document", "text/html"}, {"XHR", "", ""}, {"", "style", "text/plain"}, {"", "empty", "text/html"},
		{"", "embed", "application/x-font-woff"}, {"", "", "application/vnd.ms-fontobject"}, {"", "", "application/rss+xml"},
		{"", "", "text/css; charset=utf-8"}, {"", "json", "text/html"}, {"", " style", ""}, {"", "object", "application/ecmascript"},
		{"", "", "text/event-stream"}, {"", "", "application/font-sfnt"}, {"", "Manifest", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, own, dest, ct string) {
		rec := &inRec{rec: &warc.Record{}}
		if own != "" {
			rec.rec.Header = append(rec.rec.Header, warc.Field{Name: "WARC-Resource-Type", Value: own})
		}
		ex := Exchange{ReqHeader: http.Header{}, RespHeader: http.Header{}}
		if dest != "" {
			ex.ReqHeader["Sec-Fetch-Dest"] = []string{dest}
		}
		if ct != "" {
			ex.RespHeader["Content-Type"] = []string{ct}
		}
		got, before := resourceType(rec, ex), oldResourceType(rec, ex)
		d := strings.ToLower(dest)
		switch strings.TrimSpace(d) {
		case "json", "fencedframe", "audioworklet", "paintworklet", "xslt":
			if strings.TrimSpace(strings.ToLower(own)) == "" {
				if want := ResourceTypeFromDest(d); got != want {
					t.Fatalf("own %q dest %q: %s, want the destination's %s", own, dest, got, want)
				}
			}
			return
		}
		if d != strings.TrimSpace(d) && ResourceTypeFromDest(d) != ResourceOther {
			return // spaces around a known destination: now its type
		}
		if got != before {
			t.Fatalf("own %q dest %q content-type %q: %s, before %s", own, dest, ct, got, before)
		}
	})
}

func oldResourceType(x *inRec, ex Exchange) string {
	for _, name := range []string{warc.HeaderResourceType, "WARC-Resource-Type"} {
		if v := strings.ToLower(strings.TrimSpace(x.rec.Get(name))); v != "" {
			return v
		}
	}
	switch strings.ToLower(ex.ReqHeader.Get("Sec-Fetch-Dest")) {
	case "document", "iframe", "frame":
		return "document"
	case "style":
		return "stylesheet"
	case "script", "worker", "sharedworker", "serviceworker":
		return "script"
	case "image":
		return "image"
	case "font":
		return "font"
	case "audio", "video", "track":
		return "media"
	case "manifest":
		return "manifest"
	case "empty":
		return "fetch"
	}
	mt := oldMimeOf(ex.RespHeader.Get("Content-Type"))
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return "document"
	case mt == "text/css":
		return "stylesheet"
	case strings.Contains(mt, "javascript") || mt == "text/ecmascript":
		return "script"
	case strings.HasPrefix(mt, "image/"):
		return "image"
	case strings.HasPrefix(mt, "font/") || strings.Contains(mt, "font-woff") || mt == "application/vnd.ms-fontobject":
		return "font"
	case strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/"):
		return "media"
	case strings.Contains(mt, "json") || strings.HasSuffix(mt, "/xml"):
		return "fetch"
	}
	return "other"
}

// oldMimeOf is the writer's media type of 5d984c7, kept with the reference above.
func oldMimeOf(ct string) string {
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
