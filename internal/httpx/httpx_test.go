package httpx

import (
	"mime"
	"testing"
)

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		"text/html":                      "text/html",
		"Text/HTML; charset=utf-8":       "text/html",
		" application/json ;x=1":         "application/json",
		`text/plain; charset="unclosed`:  "text/plain",
		"":                               "",
		"garbage":                        "garbage",
		"multipart/form-data; boundary=": "multipart/form-data",
	} {
		if got := MediaType(in); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMediaType: wherever mime.ParseMediaType accepts the media type, both agree.
func FuzzMediaType(f *testing.F) {
	f.Add("text/html; charset=utf-8")
	f.Add("APPLICATION/X-WWW-FORM-URLENCODED")
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, err := mime.ParseMediaType(ct)
		if mt != "" || err == nil {
			if got := MediaType(ct); got != mt {
				t.Fatalf("MediaType(%q) = %q, mime.ParseMediaType %q (%v)", ct, got, mt, err)
			}
		}
	})
}
