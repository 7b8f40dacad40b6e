package recording

import (
	"mime"
	"net/http"
	"testing"

	"github.com/pab-dev/pab/warc"
)

// TestRequestResourceType: the request-only classification (what pab record stores) gives
// the DevTools names, Sec-Fetch-Dest first, then X-Requested-With, Accept and the path.
func TestRequestResourceType(t *testing.T) {
	for _, c := range []struct{ dest, xrw, accept, path, want string }{
		{"style", "", "", "/a", ResourceStylesheet},
		{"empty", "", "text/html", "/", ResourceFetch},
		{"json", "", "", "/", ResourceFetch},
		{"manifest", "", "", "/m", ResourceManifest},
		{"object", "", "", "/x.swf", ResourceOther},
		{"fencedframe", "", "", "/ad", ResourceDocument},
		{"", "XMLHttpRequest", "text/html", "/", ResourceFetch},
		{"", "", "text/css,*/*;q=0.1", "/", ResourceStylesheet},
		{"", "", "application/vnd.api+json", "/", ResourceFetch},
		{"", "", "*/*", "/a.woff2", ResourceFont},
		{"", "", "", "/a.css", ResourceStylesheet},
		{"", "", "", "/f.zip", ResourceOther},
		{"", "", "", "/dir/", ResourceDocument},
		{"", "", "", "", ResourceDocument},
	} {
		h := http.Header{}
		for k, v := range map[string]string{"Sec-Fetch-Dest": c.dest, "X-Requested-With": c.xrw, "Accept": c.accept} {
			if v != "" {
				h.Set(k, v)
			}
		}
		if got := RequestResourceType(h, c.path); got != c.want {
			t.Errorf("dest %q xrw %q accept %q path %q: %s, want %s", c.dest, c.xrw, c.accept, c.path, got, c.want)
		}
	}
}

// TestImportResourceType: an import keeps the input's own type, else takes the request's
// Sec-Fetch-Dest, else the response's media type; a destination with no type of its own
// leaves it to the media type.
func TestImportResourceType(t *testing.T) {
	for _, c := range []struct{ own, dest, ct, want string }{
		{"XHR", "document", "text/html", "xhr"},
		{"", "style", "text/plain", ResourceStylesheet},
		{"", "empty", "text/html", ResourceFetch},
		{"", "embed", "application/x-font-woff", ResourceFont},
		{"", "", "application/vnd.ms-fontobject", ResourceFont},
		{"", "", "application/xml", ResourceFetch},
		{"", "", "application/rss+xml", ResourceOther},
		{"", "", "text/css; charset=utf-8", ResourceStylesheet},
		{"", "", "application/octet-stream", ResourceOther},
	} {
		var rec inRec
		rec.rec = &warc.Record{}
		if c.own != "" {
			rec.rec.Header = append(rec.rec.Header, warc.Field{Name: "WARC-Resource-Type", Value: c.own})
		}
		ex := Exchange{ReqHeader: http.Header{}, RespHeader: http.Header{"Content-Type": {c.ct}}}
		if c.dest != "" {
			ex.ReqHeader.Set("Sec-Fetch-Dest", c.dest)
		}
		if got := resourceType(&rec, ex); got != c.want {
			t.Errorf("own %q dest %q content-type %q: %s, want %s", c.own, c.dest, c.ct, got, c.want)
		}
	}
}

// FuzzAcceptMediaType: acceptMediaType gives what mime.ParseMediaType gives for every media
// range, and accepts exactly the ranges it accepts.
func FuzzAcceptMediaType(f *testing.F) {
	for _, s := range []string{"", "*/*", "image/webp", "Text/HTML", "text", "/x", "x/", "a/b/c", "a//b",
		"*/*;q=0.8", "text/html ;level=1", "t\u00e9xt/html", "image/*", "a b/c", "a/b\x7f", "x/y;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, part string) {
		mt, _, err := mime.ParseMediaType(part)
		got, ok := acceptMediaType(part)
		if ok != (err == nil) || (ok && got != mt) {
			t.Fatalf("acceptMediaType(%q) = %q, %v; mime.ParseMediaType %q, %v", part, got, ok, mt, err)
		}
	})
}
