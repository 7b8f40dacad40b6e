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

func TestRequestKeyType(t *testing.T) {
	for in, want := range map[string]string{
		"application/x-www-form-urlencoded; charset=UTF-8":        "application/x-www-form-urlencoded",
		"Multipart/Form-Data; boundary=----WebKitFormBoundaryAbC": "multipart/form-data; boundary=----WebKitFormBoundaryAbC",
		`multipart/form-data; charset=utf-8; boundary="a b:c"`:    `multipart/form-data; boundary="a b:c"`,
		"multipart/form-data":                     "multipart/form-data",
		"multipart/form-data; boundary=":          "multipart/form-data",
		`multipart/form-data; boundary="unclosed`: "multipart/form-data",
		"multipart/mixed; boundary=xyz":           "multipart/mixed; boundary=xyz",
		"":                                        "",
	} {
		if got := RequestKeyType(in); got != want {
			t.Errorf("RequestKeyType(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRequestKeyType: the value kept parses to the same media type and boundary as the
// value it was made from, and keeping it again changes nothing.
func FuzzRequestKeyType(f *testing.F) {
	f.Add("multipart/form-data; boundary=----x")
	f.Add(`multipart/form-data; boundary="a;b"; charset=x`)
	f.Fuzz(func(t *testing.T, ct string) {
		got := RequestKeyType(ct)
		if MediaType(got) != MediaType(ct) {
			t.Fatalf("RequestKeyType(%q) = %q: media type changed", ct, got)
		}
		if again := RequestKeyType(got); again != got {
			t.Fatalf("RequestKeyType(%q) = %q, then %q", ct, got, again)
		}
		if got != MediaType(ct) {
			_, p1, _ := mime.ParseMediaType(ct)
			_, p2, err := mime.ParseMediaType(got)
			if err != nil || p1["boundary"] != p2["boundary"] {
				t.Fatalf("RequestKeyType(%q) = %q: boundary %q, want %q (%v)", ct, got, p2["boundary"], p1["boundary"], err)
			}
		}
	})
}
