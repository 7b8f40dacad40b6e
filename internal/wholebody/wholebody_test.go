package wholebody

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pab-dev/pab/internal/readlimit"
)

// TestRead: a body of at most max bytes comes back in memory with its length, a chunked one
// with a Content-Length, the server's request untouched; no body passes as it is.
func TestRead(t *testing.T) {
	r := httptest.NewRequest("POST", "/x", strings.NewReader("12345"))
	orig := r.Body
	got, err := Read(r, 5)
	if err != nil {
		t.Fatal(err)
	}
	if got == r || r.Body != orig || r.ContentLength != 5 {
		t.Errorf("the request given was changed (or not copied): %+v", r)
	}
	if b, _ := io.ReadAll(got.Body); string(b) != "12345" || got.ContentLength != 5 {
		t.Errorf("copy: body %q, length %d", b, got.ContentLength)
	}
	if b, err := io.ReadAll(got.Body); len(b) != 0 || err != nil {
		t.Errorf("copy read again after its end: %q, %v; want io.EOF", b, err)
	}

	chunked := httptest.NewRequest("POST", "/x", strings.NewReader("abc"))
	chunked.ContentLength, chunked.TransferEncoding = -1, []string{"chunked"}
	got, err = Read(chunked, 5)
	if err != nil || got.ContentLength != 3 || got.TransferEncoding != nil {
		t.Errorf("chunked: %v, length %d, transfer-encoding %v", err, got.ContentLength, got.TransferEncoding)
	}
	empty := httptest.NewRequest("POST", "/x", strings.NewReader(""))
	empty.ContentLength = -1
	if got, err = Read(empty, 5); err != nil || got.ContentLength != 0 || got.Body != http.NoBody {
		t.Errorf("empty chunked body: %v, length %d, body %v", err, got.ContentLength, got.Body)
	}

	none := httptest.NewRequest("GET", "/x", nil)
	none.Body = io.NopCloser(iotest.ErrReader(errors.New("must not be read")))
	if got, err = Read(none, 5); err != nil || got != none {
		t.Errorf("no body: %v, %p; want the same request %p, unread", err, got, none)
	}
}

// TestReadRefused: over max bytes is a *readlimit.TooLargeError, a read error is returned
// as it is; no request comes back.
func TestReadRefused(t *testing.T) {
	r := httptest.NewRequest("POST", "/x", strings.NewReader("123456"))
	got, err := Read(r, 5)
	var tl *readlimit.TooLargeError
	if !errors.As(err, &tl) || tl.Max != 5 || got != nil {
		t.Errorf("6 bytes, max 5: %v, %v; want a TooLargeError", got, err)
	}
	broken := errors.New("client gone")
	r = httptest.NewRequest("POST", "/x", nil)
	r.ContentLength, r.Body = 10, io.NopCloser(iotest.ErrReader(broken))
	if got, err := Read(r, 5); !errors.Is(err, broken) || got != nil {
		t.Errorf("read error: %v, %v; want %v", got, err, broken)
	}
}
