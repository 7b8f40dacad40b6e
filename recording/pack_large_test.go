package recording

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestPackStreamLargeEntry: an entry whose records together are larger than the bytes
// pack keeps in flight (a POST with a body, answered with more than packInFlight bytes)
// is packed, and gives the same files as the in-memory packer; before, the request's
// member waited for budget that only the entry itself could free.
func TestPackStreamLargeEntry(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "bundle")
	w, err := NewBundleWriter(bundle, Manifest{TaskID: "large"})
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, packInFlight+1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	if _, err := w.Add(Exchange{Method: "POST", URL: "https://large.test/upload", Date: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC),
		ReqHeader: http.Header{"Content-Type": {"text/plain"}}, ReqBody: []byte("a request body"), Status: 200,
		RespHeader: http.Header{"Content-Type": {"application/octet-stream"}}, Body: body}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, b := t.TempDir(), t.TempDir()
	done := make(chan error, 1)
	go func() { done <- packStream(context.Background(), bundle, a, PartSize) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("packStream did not end in 5 minutes: deadlocked on its in-flight budget")
	}
	packInMemory(t, bundle, b, PartSize)
	sameDirs(t, a, b)
}
