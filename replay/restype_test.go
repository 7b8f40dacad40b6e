package replay

import (
	"net/http"
	"testing"
)

func TestRequestType(t *testing.T) {
	cases := []struct {
		dest, xrw, accept, url, want string
	}{
		{"document", "", "", "https://a.test/x.png", TypeDocument}, // Sec-Fetch-Dest wins
		{"iframe", "", "", "https://a.test/", TypeDocument},
		{"image", "", "text/html", "https://a.test/", TypeImage},
		{"font", "", "", "https://a.test/", TypeFont},
		{"style", "", "", "https://a.test/", TypeStyle},
		{"script", "", "", "https://a.test/", TypeScript},
		{"serviceworker", "", "", "https://a.test/", TypeScript},
		{"empty", "", "text/html", "https://a.test/", TypeAPI},
		{"video", "", "", "https://a.test/", TypeMedia},
		{"track", "", "", "https://a.test/", TypeMedia},
		{"manifest", "", "", "https://a.test/", TypeOther},
		{"json", "", "", "https://a.test/", TypeAPI},
		{"", "XMLHttpRequest", "text/html", "https://a.test/", TypeAPI},
		{"", "", "text/html,application/xhtml+xml,*/*;q=0.8", "https://a.test/a.js", TypeDocument},
		{"", "", "image/avif,image/webp,*/*", "https://a.test/", TypeImage},
		{"", "", "text/css,*/*;q=0.1", "https://a.test/", TypeStyle},
		{"", "", "application/json, text/plain, */*", "https://a.test/", TypeAPI},
		{"", "", "application/vnd.api+json", "https://a.test/", TypeAPI},
		{"", "", "*/*", "https://a.test/app.JS", TypeScript},
		{"", "", "*/*", "https://a.test/a.woff2", TypeFont},
		{"", "", "", "https://a.test/a.css", TypeStyle},
		{"", "", "", "https://a.test/a.json", TypeAPI},
		{"", "", "", "https://a.test/v.mp4", TypeMedia},
		{"", "", "", "https://a.test/f.zip", TypeOther},
		{"", "", "", "https://a.test/dir/", TypeDocument},
		{"", "", "", "https://a.test/faq.php?x=1", TypeDocument},
		{"", "", "", "https://a.test/about", TypeDocument},
		{"", "", "garbage;;;", "https://a.test/a.gif", TypeImage},
	}
	for _, c := range cases {
		r, _ := http.NewRequest("GET", c.url, nil)
		if c.dest != "" {
			r.Header.Set("Sec-Fetch-Dest", c.dest)
		}
		if c.xrw != "" {
			r.Header.Set("X-Requested-With", c.xrw)
		}
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if got := RequestType(r); got != c.want {
			t.Errorf("dest %q xrw %q accept %q url %s: %s, want %s", c.dest, c.xrw, c.accept, c.url, got, c.want)
		}
	}
}

func TestAcceptsJSON(t *testing.T) {
	for accept, want := range map[string]bool{
		"application/json":                   true,
		"text/plain, application/json;q=0.9": true,
		"application/problem+json":           true,
		"application/json;q=0":               false,
		"*/*":                                false,
		"text/html":                          false,
		"":                                   false,
	} {
		if got := acceptsJSON(accept); got != want {
			t.Errorf("acceptsJSON(%q) = %v", accept, got)
		}
	}
}

func FuzzRequestType(f *testing.F) {
	f.Add("", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8", "/a/b.png")
	f.Add("empty", "application/json", "/api")
	f.Add("nonsense", ";;;,,=", "/%zz")
	valid := map[string]bool{TypeDocument: true, TypeImage: true, TypeFont: true, TypeStyle: true,
		TypeScript: true, TypeAPI: true, TypeMedia: true, TypeOther: true}
	f.Fuzz(func(t *testing.T, dest, accept, path string) {
		r, err := http.NewRequest("GET", "http://a.test/", nil)
		if err != nil {
			t.Fatal(err) // a constant URL
		}
		r.URL.Path = path
		r.Header.Set("Sec-Fetch-Dest", dest)
		r.Header.Set("Accept", accept)
		if got := RequestType(r); !valid[got] {
			t.Errorf("RequestType = %q", got)
		}
		acceptsJSON(accept)
	})
}

// TestTypeOf: every recorded resource type, in the DevTools names and in the log names
// older pab recordings hold, has one log name.
func TestTypeOf(t *testing.T) {
	for in, want := range map[string]string{
		"document": TypeDocument, "stylesheet": TypeStyle, "style": TypeStyle, "script": TypeScript,
		"image": TypeImage, "font": TypeFont, "media": TypeMedia, "fetch": TypeAPI, "xhr": TypeAPI,
		"api": TypeAPI, "manifest": TypeOther, "ping": TypeOther, "": TypeOther,
	} {
		if got := TypeOf(in); got != want {
			t.Errorf("TypeOf(%q) = %q, want %q", in, got, want)
		}
	}
}
