package browser

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/internal/testtool"
)

// TestArgs: Chromium trusts pab's CA by its SPKI hash and never ignores every
// certificate error; headless unless headed; language flags only with a locale.
func TestArgs(t *testing.T) {
	b := Options{Proxy: "127.0.0.1:8899", SPKI: "c3BraQ==", Profile: "/tmp/p", Locale: "de-DE"}
	got := strings.Join(Args(b, ""), " ")
	for _, want := range []string{
		"--proxy-server=http://127.0.0.1:8899", "--proxy-bypass-list=<-loopback>", "--disable-quic",
		"--ignore-certificate-errors-spki-list=c3BraQ==", "--user-data-dir=/tmp/p", "--remote-debugging-port=0",
		"--headless", "--lang=de-DE", "--accept-lang=de-DE", "--disable-background-networking",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %s: %s", want, got)
		}
	}
	if strings.Contains(got, "--ignore-certificate-errors ") || strings.Contains(got, "--ignore-certificate-errors=") {
		t.Errorf("args ignore every certificate error: %s", got)
	}
	if !strings.HasSuffix(got, " about:blank") {
		t.Errorf("args without a URL do not end with about:blank: %s", got)
	}
	if strings.Contains(got, "--no-sandbox") != (os.Geteuid() == 0) {
		t.Errorf("--no-sandbox must be given exactly when running as root: %s", got)
	}
	b.Headed, b.Locale, b.Port = true, "", 9222
	got = strings.Join(Args(b, "https://example.test/"), " ")
	if strings.Contains(got, "--headless") || strings.Contains(got, "--lang") || !strings.HasSuffix(got, " https://example.test/") ||
		!strings.Contains(got, "--remote-debugging-port=9222") {
		t.Errorf("headed args with a URL and port: %s", got)
	}
}

// TestArgsWithoutProxy: a page without a proxy (a file:// report) gets no proxy flags and
// no SPKI; Extra comes after pab's own flags, before the page.
func TestArgsWithoutProxy(t *testing.T) {
	got := Args(Options{Extra: []string{"--hide-scrollbars"}}, "file:///tmp/r.html")
	s := strings.Join(got, " ")
	if strings.Contains(s, "--proxy") || strings.Contains(s, "spki") {
		t.Errorf("args without a proxy: %s", s)
	}
	if n := len(got); n < 2 || got[n-2] != "--hide-scrollbars" || got[n-1] != "file:///tmp/r.html" {
		t.Errorf("extra and page not last: %s", s)
	}
}

// TestFind: a missing executable wraps ErrNotFound and names the path.
func TestFind(t *testing.T) {
	_, err := Find("/nonexistent/chromium")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/nonexistent/chromium") {
		t.Errorf("Find: %v", err)
	}
}

// TestStartStop starts Debian's Chromium with Start, checks its DevTools address answers,
// then stops it: the whole process group is gone and the profile Start made is removed.
func TestStartStop(t *testing.T) {
	exe, err := Find("")
	if err != nil {
		testtool.Missing(t, "chromium not found: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := Start(ctx, exe, Options{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.CDP, "ws://127.0.0.1:") {
		t.Errorf("CDP address %q", p.CDP)
	}
	profile, pgid := p.profile, p.w.Pgid()
	if _, err := os.Stat(profile); err != nil {
		t.Fatalf("profile: %v", err)
	}
	p.Stop()
	if procgroup.Alive(pgid) {
		t.Errorf("process group %d still alive after Stop", pgid)
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile %s not removed: %v", profile, err)
	}
}

// TestStartExitsEarly: an executable that exits before printing a DevTools line gives an
// error naming it and its exit, and leaves no profile behind.
func TestStartExitsEarly(t *testing.T) {
	exe, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	_, err = Start(context.Background(), exe, Options{}, "", "")
	if err == nil || !strings.Contains(err.Error(), exe) || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("Start(false): %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}
