package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"
)

// mpPart is one part of a test multipart body: a field, or a file when file is set.
type mpPart struct {
	name, value string
	file        bool
	filename    string
}

// multipartOf writes parts as multipart/form-data with the given boundary and returns the
// body and its Content-Type, the way a browser's FormData does.
func multipartOf(t testing.TB, boundary string, parts []mpPart) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.file {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, p.name, p.filename))
			h.Set("Content-Type", "application/octet-stream")
		} else {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"`, p.name))
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(p.value))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), w.FormDataContentType()
}

func TestMultipartKey(t *testing.T) {
	s := loadSites(t, map[string]string{"_default.yaml": "body_drop: [\"*token*\"]\n"})
	key := func(body []byte, ct string) string {
		return s.Key(Request{Method: "POST", URL: mustURL(t, "https://shop.test/upload"), Body: body, ContentType: ct}).Body
	}
	photo := "\x89PNG\r\n\x1a\n--not-a-boundary\r\n"
	sum := sha256.Sum256([]byte(photo))
	parts := []mpPart{
		{name: "title", value: "Café & co #1"},
		{name: "csrf_token", value: "fresh-1"},
		{name: "photo", value: photo, file: true, filename: "chat noir.png"},
		{name: "empty", file: true, filename: ""},
	}
	b1, ct1 := multipartOf(t, "----WebKitFormBoundaryAAAAAAAAAAAAAAAA", parts)
	parts[1].value = "fresh-2" // a new token on every send, dropped by body_drop
	b2, ct2 := multipartOf(t, "----WebKitFormBoundaryZZZZZZZZZZZZZZZZ", parts)
	if bytes.Equal(b1, b2) {
		t.Fatal("the two bodies should differ")
	}
	want := "multipart:title=Café %26 co %231&photo=#file:chat noir.png:sha256:" + hex.EncodeToString(sum[:]) +
		"&empty=#file::sha256:" + hex.EncodeToString(func() []byte { s := sha256.Sum256(nil); return s[:] }())
	if k1, k2 := key(b1, ct1), key(b2, ct2); k1 != want || k2 != want {
		t.Errorf("keys:\n %q\n %q\nwant %q", k1, k2, want)
	}

	// Order, names, file names and contents count.
	for _, c := range []struct {
		name  string
		parts []mpPart
	}{
		{"order", []mpPart{{name: "b", value: "2"}, {name: "a", value: "1"}}},
		{"value", []mpPart{{name: "a", value: "1"}, {name: "b", value: "3"}}},
		{"name", []mpPart{{name: "a", value: "1"}, {name: "c", value: "2"}}},
		{"a file is not a field", []mpPart{{name: "a", value: "1"}, {name: "b", value: "2", file: true, filename: "b"}}},
		{"file name", []mpPart{{name: "a", value: "1"}, {name: "b", value: "2", file: true, filename: "c"}}},
	} {
		base, bct := multipartOf(t, "x1", []mpPart{{name: "a", value: "1"}, {name: "b", value: "2"}})
		other, oct := multipartOf(t, "x2", c.parts)
		if key(base, bct) == key(other, oct) {
			t.Errorf("%s: same key %q", c.name, key(base, bct))
		}
	}
	fileB, fct := multipartOf(t, "x1", []mpPart{{name: "f", value: "AAA", file: true, filename: "f"}})
	fileC, fct2 := multipartOf(t, "x2", []mpPart{{name: "f", value: "BBB", file: true, filename: "f"}})
	if key(fileB, fct) == key(fileC, fct2) {
		t.Error("file contents do not count")
	}

	// RFC 2231 file names and UTF-8 file names as Chromium sends them.
	utf := []byte("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"résumé.pdf\"\r\n\r\nX\r\n--b--\r\n")
	enc := []byte("--c\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf\r\n\r\nX\r\n--c--\r\n")
	if ku, ke := key(utf, "multipart/form-data; boundary=b"), key(enc, "multipart/form-data; boundary=c"); ku != ke || !strings.Contains(ku, "#file:résumé.pdf:") {
		t.Errorf("file names: %q, %q", ku, ke)
	}

	// Malformed bodies are digested.
	for _, c := range []struct{ name, body, ct string }{
		{"cut short", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1", "multipart/form-data; boundary=b"},
		{"no close delimiter", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n", "multipart/form-data; boundary=b"},
		{"wrong boundary", "--b\r\n\r\n1\r\n--b--\r\n", "multipart/form-data; boundary=a"},
		{"no boundary", "--b\r\n\r\n1\r\n--b--\r\n", "multipart/form-data"},
		{"bad disposition", "--b\r\nContent-Disposition: form-data; name=\r\n\r\n1\r\n--b--\r\n", "multipart/form-data; boundary=b"},
		{"not multipart at all", "a=1&b=2", "multipart/form-data; boundary=b"},
		{"boundary too long", "--" + strings.Repeat("b", 71) + "--\r\n", "multipart/form-data; boundary=" + strings.Repeat("b", 71)},
	} {
		if got := key([]byte(c.body), c.ct); got != sha([]byte(c.body)) {
			t.Errorf("%s: %q, want the digest", c.name, got)
		}
	}

	// Too many parts: digested.
	var many []mpPart
	for i := 0; i <= MaxMultipartParts; i++ {
		many = append(many, mpPart{name: "p", value: "v"})
	}
	mb, mct := multipartOf(t, "m", many)
	if got := key(mb, mct); got != sha(mb) {
		t.Errorf("%d parts: %.60q..., want the digest", len(many), got)
	}
	if ok, oct := multipartOf(t, "m", many[:MaxMultipartParts]); !strings.HasPrefix(key(ok, oct), multipartPrefix) {
		t.Errorf("%d parts are keyed by digest", MaxMultipartParts)
	}
}

// FuzzMultipartKey checks that the multipart key never panics, stays on one line, and does
// not depend on the boundary: the same parts written with two boundaries have one key, and
// that key names the parts (it starts with "multipart:"). Arbitrary bytes under a
// multipart Content-Type give either a parts key or the digest of the bytes.
func FuzzMultipartKey(f *testing.F) {
	f.Add("title", "hello", "photo", "x.png", []byte("\x89PNG"), "b1", "----WebKitFormBoundary7MA4YWxkTrZu0gW", []byte("--b\r\n\r\n--b--"))
	f.Add("a\"b", "line\r\nbreak", "f", "", []byte{}, "x", "y", []byte("--x\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n--x--\r\n"))
	f.Add("", "--b1", "n", "é.txt", []byte("--b2--\r\n"), "b1", "b2", []byte(nil))
	s, err := Default()
	if err != nil {
		f.Fatal(err)
	}
	u := mustURL(f, "https://shop.test/upload")
	f.Fuzz(func(t *testing.T, field, value, fileField, filename string, content []byte, boundary1, boundary2 string, raw []byte) {
		// Arbitrary bytes: a key on one line, the same twice, parts or the digest.
		for _, ct := range []string{"multipart/form-data; boundary=" + boundary1, "multipart/form-data; boundary=\"" + boundary2 + "\""} {
			r := Request{Method: "POST", URL: u, Body: raw, ContentType: ct}
			k := s.Key(r)
			if k.String() != s.Key(r).String() || strings.ContainsAny(k.String(), "\r\n") {
				t.Fatalf("key not stable or not one line: %q", k.String())
			}
			if len(raw) > 0 && !strings.HasPrefix(k.Body, multipartPrefix) && k.Body != sha(raw) {
				t.Fatalf("body key %q is neither parts nor the digest", k.Body)
			}
		}
		// The same parts under two boundaries. Names with control characters cannot be
		// written into a part's header (multipart.Writer would break the header).
		if strings.ContainsFunc(field+fileField+filename, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return
		}
		build := func(boundary string) ([]byte, string, bool) {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			if w.SetBoundary(boundary) != nil {
				return nil, "", false
			}
			fw, err := w.CreateFormField(field)
			if err != nil {
				return nil, "", false
			}
			fw.Write([]byte(value))
			ff, err := w.CreateFormFile(fileField, filename)
			if err != nil {
				return nil, "", false
			}
			ff.Write(content)
			if w.Close() != nil {
				return nil, "", false
			}
			return buf.Bytes(), w.FormDataContentType(), true
		}
		b1, ct1, ok1 := build(boundary1)
		b2, ct2, ok2 := build(boundary2)
		if !ok1 || !ok2 {
			return // a boundary multipart.Writer refuses
		}
		if bytes.Contains([]byte(value), []byte("--"+boundary1)) || bytes.Contains(content, []byte("--"+boundary1)) ||
			bytes.Contains([]byte(value), []byte("--"+boundary2)) || bytes.Contains(content, []byte("--"+boundary2)) {
			return // a part holding its own delimiter is another body (RFC 2046 section 5.1.1)
		}
		k1 := s.Key(Request{Method: "POST", URL: u, Body: b1, ContentType: ct1})
		k2 := s.Key(Request{Method: "POST", URL: u, Body: b2, ContentType: ct2})
		if k1.String() != k2.String() {
			t.Fatalf("boundary counts:\n %q (%q)\n %q (%q)", k1.String(), boundary1, k2.String(), boundary2)
		}
		if len(b1) <= MaxStructuredBody && !strings.HasPrefix(k1.Body, multipartPrefix) {
			t.Fatalf("well-formed body keyed %q", k1.Body)
		}
	})
}
