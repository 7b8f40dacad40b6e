package recording

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestPackStreamLargeEntry: an entry whose records together are larger than the bytes
// pack keeps in flight (a POST with a body, answered with more than packInFlight bytes)
// is packed, and gives the same files as the in-memory packer; before, the request's
// member waited for budget that only the entry itself could free. Small entries come
// before it (and after): the batch they fill must be handed over before the large one
// waits for the budget they hold, or the writer waits for a batch no worker has.
func TestPackStreamLargeEntry(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "bundle")
	w, err := NewBundleWriter(bundle, Manifest{TaskID: "large"})
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	small := func(i int) {
		t.Helper()
		if _, err := w.Add(Exchange{Method: "GET", URL: fmt.Sprintf("https://large.test/page/%d", i), Date: date, Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/html"}}, Body: fmt.Appendf(nil, "<title>page %d</title>", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		small(i)
	}
	body := make([]byte, packInFlight+1<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	if _, err := w.Add(Exchange{Method: "POST", URL: "https://large.test/upload", Date: date,
		ReqHeader: http.Header{"Content-Type": {"text/plain"}}, ReqBody: []byte("a request body"), Status: 200,
		RespHeader: http.Header{"Content-Type": {"application/octet-stream"}}, Body: body}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 600; i++ { // more than a batch holds
		small(i)
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
	case <-time.After(2 * time.Minute):
		t.Fatal("packStream did not end in 2 minutes: deadlocked on its in-flight budget")
	}
	packInMemory(t, bundle, b, PartSize)
	sameDirs(t, a, b)
}
