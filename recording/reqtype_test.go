package recording

import (
	"mime"
	"mime/multipart"
	"strings"
	"testing"
)

// TestEntryRequestType: an entry keeping the boundary gives it as it is; an entry of a
// recording written before (media type alone) gets the boundary of the delimiter its body
// starts with, quoted when needed; a body starting otherwise keeps the media type alone.
func TestEntryRequestType(t *testing.T) {
	for _, c := range []struct{ reqType, body, want string }{
		{"multipart/form-data; boundary=abc", "--zzz\r\n", "multipart/form-data; boundary=abc"},
		{"multipart/form-data", "------WebKitFormBoundaryAbC\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n------WebKitFormBoundaryAbC--\r\n",
			"multipart/form-data; boundary=----WebKitFormBoundaryAbC"},
		{"multipart/form-data", "--a b:c \r\n", `multipart/form-data; boundary="a b:c"`},
		{"multipart/form-data", "--bare-lf\n", "multipart/form-data; boundary=bare-lf"},
		{"multipart/form-data", "preamble\r\n--abc\r\n", "multipart/form-data"},
		{"multipart/form-data", "--\r\n", "multipart/form-data"},
		{"multipart/form-data", "--" + strings.Repeat("x", 71) + "\r\n", "multipart/form-data"},
		{"multipart/form-data", "--no line end", "multipart/form-data"},
		{"multipart/form-data", "--ctl\x01\r\n", "multipart/form-data"},
		{"application/json", "--abc\r\n", "application/json"},
	} {
		e := &Entry{ReqType: c.reqType}
		if got := e.RequestType([]byte(c.body)); got != c.want {
			t.Errorf("RequestType(%q, %q) = %q, want %q", c.reqType, c.body, got, c.want)
		}
	}
}

// FuzzEntryRequestType: whatever the recorded body, the type read for an old entry is the
// media type alone or the media type with a boundary of 1 to 70 characters that the body
// starts with as its first delimiter; a body multipart.Writer wrote always gets its own.
func FuzzEntryRequestType(f *testing.F) {
	f.Add([]byte("--abc\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--abc--\r\n"), "")
	f.Add([]byte("--\n"), "x")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		e := &Entry{ReqType: "multipart/form-data"}
		got := e.RequestType(body)
		if got != e.ReqType {
			mt, params, err := mime.ParseMediaType(got)
			b := params["boundary"]
			if err != nil || mt != e.ReqType || b == "" || len(b) > 70 || !strings.HasPrefix(string(body), "--"+b) {
				t.Fatalf("RequestType(%q) = %q (%v)", body, got, err)
			}
		}
		var sb strings.Builder
		mw := multipart.NewWriter(&sb)
		if mw.SetBoundary(boundary) != nil {
			return
		}
		mw.WriteField("a", "1")
		mw.Close()
		if got, want := e.RequestType([]byte(sb.String())), mw.FormDataContentType(); got != want {
			t.Fatalf("written with boundary %q: RequestType = %q, want %q", boundary, got, want)
		}
	})
}
