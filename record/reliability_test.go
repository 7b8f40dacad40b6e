package record

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pab-dev/pab/tlsca"
)

// storeErrors collects the Options.OnStoreError calls of a recorder.
type storeErrors struct {
	mu    sync.Mutex
	errs  []error
	count []int
}

func (s *storeErrors) hook(err error, stored int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
	s.count = append(s.count, stored)
}

func (s *storeErrors) get() ([]error, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...), append([]int(nil), s.count...)
}

// pageServer is a plain-HTTP site whose every path answers 200 with size bytes of text
// that differ per path.
func pageServer(t *testing.T, size int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := r.URL.Path + " filler text\n"
		w.Write(bytes.Repeat([]byte(line), size/len(line)+1)[:size])
	}))
	t.Cleanup(srv.Close)
	return srv
}

func getBody(c *http.Client, u string) (int, string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestRecordJournalErrorsInjected: a write error that leaves part of an exchange in the
// file, and a sync error, each stop the recorder at once: it reports the error once, answers
// later requests 503 with the error and the number stored, and the journal keeps every
// exchange stored before, whole.
func TestRecordJournalErrorsInjected(t *testing.T) {
	srv := pageServer(t, 2000)
	for _, c := range []struct {
		name   string
		inject func(j *journal)
		want   string // in the error
		stored int    // exchanges in the journal after the failing request
	}{
		{"partial write", func(j *journal) {
			f := j.f
			j.write = func(b []byte) (int, error) {
				n, _ := f.Write(b[:len(b)/2])
				return n, syscall.ENOSPC
			}
		}, "write journal " + "%s: no space left on device", 2},
		{"sync", func(j *journal) {
			j.fsync = func() error { return syscall.EIO }
			j.lastSync = time.Time{}
		}, "sync journal %s: input/output error", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var se storeErrors
			g := newRig(t, Options{OnStoreError: se.hook})
			cl := g.client()
			for i := range 2 {
				if st, _, err := getBody(cl, fmt.Sprintf("%s/ok/%d", srv.URL, i)); err != nil || st != 200 {
					t.Fatalf("request %d: %d %v", i, st, err)
				}
			}
			j := g.rec.journal
			j.mu.Lock()
			c.inject(j)
			j.mu.Unlock()
			// the failing exchange is forwarded all the same
			if st, body, err := getBody(cl, srv.URL+"/fails"); err != nil || st != 200 || len(body) != 2000 {
				t.Fatalf("failing request: %d %d bytes %v", st, len(body), err)
			}
			wantErr := fmt.Sprintf(c.want, JournalPath(g.work))
			errs, counts := se.get()
			if len(errs) != 1 || errs[0].Error() != wantErr || counts[0] != c.stored {
				t.Fatalf("OnStoreError calls %v %v, want one with %q and %d stored", errs, counts, wantErr, c.stored)
			}
			if err := g.rec.StoreError(); err == nil || err.Error() != wantErr {
				t.Errorf("StoreError() = %v", err)
			}
			wantBody := fmt.Sprintf("pab record: cannot store exchanges: %s; stop with Ctrl-C, %d exchanges were stored\n", wantErr, c.stored)
			for i := range 3 {
				st, body, err := getBody(cl, fmt.Sprintf("%s/later/%d", srv.URL, i))
				if err != nil || st != http.StatusServiceUnavailable || body != wantBody {
					t.Errorf("request after the error: %d %q %v, want 503 %q", st, body, err, wantBody)
				}
			}
			j.mu.Lock()
			j.fsync = j.f.Sync // the disk is back: Shutdown's own fsync works
			j.mu.Unlock()
			b, _, _ := g.build() // Shutdown must return nil: the journal was cut back whole
			if len(b.Entries) != c.stored {
				t.Errorf("bundle has %d entries, want the %d stored", len(b.Entries), c.stored)
			}
			if st := g.rec.Stats(); st.Stored != int64(c.stored) || st.Refused != 3 {
				t.Errorf("stats %+v", st)
			}
			if errs, _ := se.get(); len(errs) != 1 {
				t.Errorf("OnStoreError called %d times", len(errs))
			}
			events := map[string]int{}
			for _, l := range g.logLines() {
				events[l.Event]++
			}
			if events["store-error"] != 1 || events["refused"] != 3 || events["stored"] != c.stored {
				t.Errorf("log events %v", events)
			}
		})
	}
}

// TestRecordCloseErrorReturned: an fsync that fails when the recording stops is reported
// by Shutdown (and once by OnStoreError).
func TestRecordCloseErrorReturned(t *testing.T) {
	var se storeErrors
	ca, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := New(Options{CA: ca, WorkDir: t.TempDir(), OnStoreError: se.hook})
	if err != nil {
		t.Fatal(err)
	}
	rec.journal.mu.Lock()
	rec.journal.fsync = func() error { return syscall.EIO }
	rec.journal.mu.Unlock()
	err = rec.Shutdown()
	if err == nil || !strings.Contains(err.Error(), "sync journal") || !errors.Is(err, syscall.EIO) {
		t.Errorf("Shutdown() = %v", err)
	}
	if errs, _ := se.get(); len(errs) != 1 {
		t.Errorf("OnStoreError calls %v", errs)
	}
}

// TestShutdownDrainsInFlight: 16 slow exchanges, plain HTTP and HTTPS, are in flight
// (upstream has sent half of each body) when Shutdown is called: every one is answered
// whole and stored, and Shutdown returns once they are done.
func TestShutdownDrainsInFlight(t *testing.T) {
	const n, size = 16, 64 << 10
	var arrived atomic.Int32
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		body := bytes.Repeat([]byte(r.URL.Path+"\n"), size/(len(r.URL.Path)+1)+1)[:size]
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.Write(body[:size/2])
		w.(http.Flusher).Flush()
		<-release
		w.Write(body[size/2:])
	})
	plain := httptest.NewServer(slow)
	t.Cleanup(plain.Close)
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "site-ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := siteCA.LeafFor("slow.test")
	if err != nil {
		t.Fatal(err)
	}
	secure := httptest.NewUnstartedServer(slow)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	secure.StartTLS()
	t.Cleanup(secure.Close)
	// closed before the servers (cleanups run last first), whatever the test does
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)

	g := newRig(t, Options{Resolve: map[string]string{"slow.test:443": secure.Listener.Addr().String()}, RootCAs: siteCA.CertPool()})
	c := g.client()
	var urls []string
	for i := range n {
		if i%2 == 0 {
			urls = append(urls, fmt.Sprintf("%s/plain/%d", plain.URL, i))
		} else {
			urls = append(urls, fmt.Sprintf("https://slow.test/tls/%d", i))
		}
	}
	type result struct {
		status int
		n      int
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			st, body, err := getBody(c, u)
			results[i] = result{st, len(body), err}
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for arrived.Load() < n {
		if time.Now().After(deadline) {
			open()
			t.Fatalf("only %d of %d requests reached upstream", arrived.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- g.rec.Shutdown() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-shut:
		open()
		t.Fatalf("Shutdown returned (%v) with %d exchanges in flight", err, n)
	default:
	}
	// no new connection is accepted while draining
	if conn, err := net.DialTimeout("tcp", g.addr, time.Second); err == nil {
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(conn, "GET %s/late HTTP/1.1\r\nHost: %s\r\n\r\n", plain.URL, plain.Listener.Addr())
		if b, _ := io.ReadAll(conn); bytes.HasPrefix(b, []byte("HTTP/1.1 200")) {
			t.Errorf("a new connection was served while stopping: %q", b)
		}
		conn.Close()
	}
	open()
	wg.Wait()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > DefaultShutdownWait/2 {
		t.Errorf("Shutdown took %v", d)
	}
	for i, r := range results {
		if r.err != nil || r.status != 200 || r.n != size {
			t.Errorf("%s: status %d, %d of %d bytes, %v", urls[i], r.status, r.n, size, r.err)
		}
	}
	b, _, _ := g.build()
	if len(b.Entries) != n {
		t.Errorf("bundle has %d entries, want %d", len(b.Entries), n)
	}
	for _, u := range urls {
		if e := entryByURL(b, u); e == nil || e.Size != size {
			t.Errorf("%s: entry %+v", u, e)
		}
	}
	if st := g.rec.Stats(); st.Stored != n || st.NotStored != 0 {
		t.Errorf("stats %+v", st)
	}
	if _, err := os.Stat(JournalPath(g.work)); err != nil {
		t.Error(err)
	}
}
