package record

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pab-dev/pab/internal/testtool"
)

// mountTmpfs mounts a tmpfs of the given size ("256k") on a new directory, unmounted at
// the end of the test. Without the right to mount it skips, unless CI is "true".
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		testtool.Missing(t, "mount a %s tmpfs on %s: %v; the full-disk test needs root", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestRecordFullDisk records onto a real 256 KiB tmpfs until it is full: the recorder
// reports ENOSPC once, naming the journal, answers every later request (plain HTTP and
// HTTPS) 503 with the error and the number stored, and the journal holds every exchange
// stored, whole, so the bundle is built from them.
func TestRecordFullDisk(t *testing.T) {
	tmp := mountTmpfs(t, "256k")
	srv := pageServer(t, 8000)
	shop, siteCA := shopSite(t)
	from, to, err := ParseResolve(fmt.Sprintf("shop.test:443:127.0.0.1:%d", shop.Listener.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	var se storeErrors
	work := filepath.Join(tmp, "work")
	g := newRig(t, Options{WorkDir: work, OnStoreError: se.hook, Resolve: map[string]string{from: to}, RootCAs: siteCA.CertPool()})
	c := g.client()
	ok, first := 0, -1
	for i := 0; i < 200; i++ {
		st, body, err := getBody(c, fmt.Sprintf("%s/page/%d", srv.URL, i))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if st == http.StatusServiceUnavailable {
			first = i
			if !strings.HasPrefix(body, "pab record: cannot store exchanges: write journal "+JournalPath(work)+": no space left on device; stop with Ctrl-C, ") {
				t.Errorf("503 body %q", body)
			}
			break
		}
		if st != 200 || len(body) != 8000 {
			t.Fatalf("request %d: %d, %d bytes", i, st, len(body))
		}
		ok++
	}
	if first < 0 {
		t.Fatal("200 exchanges fitted in a 256 KiB tmpfs")
	}
	errs, counts := se.get()
	if len(errs) != 1 || !errors.Is(errs[0], syscall.ENOSPC) || !strings.Contains(errs[0].Error(), JournalPath(work)) {
		t.Fatalf("OnStoreError calls %v, want one ENOSPC naming the journal", errs)
	}
	stored := counts[0]
	if stored == 0 || stored != ok-1 {
		// the request that met the full disk was answered 200 but not stored
		t.Errorf("%d stored when the disk was full, %d answered before the first 503", stored, ok)
	}
	want := fmt.Sprintf("pab record: cannot store exchanges: %v; stop with Ctrl-C, %d exchanges were stored\n", errs[0], stored)
	for _, u := range []string{srv.URL + "/after", "https://shop.test/search?q=x"} {
		if st, body, err := getBody(c, u); err != nil || st != http.StatusServiceUnavailable || body != want {
			t.Errorf("%s after the disk filled: %d %q %v", u, st, body, err)
		}
	}
	b, _, _ := g.build() // Shutdown returns nil; the bundle goes to a disk with room
	if len(b.Entries) != stored {
		t.Errorf("bundle has %d entries, want the %d stored", len(b.Entries), stored)
	}
	for i := range stored {
		if entryByURL(b, fmt.Sprintf("%s/page/%d", srv.URL, i)) == nil {
			t.Errorf("page %d is not in the bundle", i)
		}
	}
	if st := g.rec.Stats(); st.Stored != int64(stored) || st.Refused != 3 || st.NotStored != 1 {
		t.Errorf("stats %+v", st)
	}
}
