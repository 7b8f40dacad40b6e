package browser

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
)

// lines returns a writer for Run and a channel of the lines written to it.
func lines(t *testing.T) (io.WriteCloser, <-chan string) {
	r, w := io.Pipe()
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text() + "\n"
		}
	}()
	t.Cleanup(func() { w.Close() })
	return w, ch
}

// next is the next line of ch, waiting at most 90 seconds; it must match re.
func next(t *testing.T, ch <-chan string, re *regexp.Regexp) []string {
	t.Helper()
	select {
	case l, ok := <-ch:
		m := re.FindStringSubmatch(l)
		if !ok || m == nil {
			t.Fatalf("line %q (open %v), want one matching %s", l, ok, re)
		}
		return m
	case <-time.After(90 * time.Second):
		t.Fatalf("no line matching %s within 90s", re)
	}
	return nil
}

var (
	profileLine = regexp.MustCompile(`^pab browser: profile (\S+)\n$`)
	cdpLine     = regexp.MustCompile(`^pab browser: CDP ws://127\.0\.0\.1:\d+/devtools/browser/\S+\n$`)
	ctrlCLine   = regexp.MustCompile(`^pab browser: press Ctrl-C to stop\n$`)
)

// TestRunReplayStopped runs a real headless Chromium: Run prints its profile and CDP
// endpoint, returns when the replay stops (sending the replay's result back), and leaves
// no profile behind.
func TestRunReplayStopped(t *testing.T) {
	exe, err := Find("")
	if err != nil {
		testtool.Missing(t, "chromium not found: %v", err)
	}
	w, out := lines(t)
	stopped := make(chan error, 1)
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), exe, Options{}, "", stopped, w) }()
	profile := next(t, out, profileLine)[1]
	next(t, out, cdpLine)
	next(t, out, ctrlCLine)
	if _, err := os.Stat(profile); err != nil {
		t.Errorf("profile while running: %v", err)
	}
	stopped <- errors.New("listener closed")
	err = <-done
	if err == nil || err.Error() != "browser: replay stopped: listener closed" {
		t.Errorf("Run = %v, want the replay's stop", err)
	}
	if got := <-stopped; got == nil || got.Error() != "listener closed" {
		t.Errorf("the replay's result was not sent back: %v", got)
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile %s not removed: %v", profile, err)
	}
}

// TestRunContextEnds: an end of ctx once Chromium runs stops it and is no error; an end
// before it started is ErrInterrupted; a profile given is kept.
func TestRunContextEnds(t *testing.T) {
	exe, err := Find("")
	if err != nil {
		testtool.Missing(t, "chromium not found: %v", err)
	}
	w, out := lines(t)
	profile := filepath.Join(t.TempDir(), "profile")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, exe, Options{Profile: profile}, "", nil, w) }()
	if got := next(t, out, profileLine)[1]; got != profile {
		t.Errorf("profile %q, want the one given, %q", got, profile)
	}
	next(t, out, cdpLine)
	next(t, out, ctrlCLine)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after ctx ended = %v, want nil", err)
	}
	if _, err := os.Stat(profile); err != nil {
		t.Errorf("a given profile was removed: %v", err)
	}
	if err := Run(ctx, exe, Options{}, "", nil, io.Discard); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run with an ended ctx = %v, want ErrInterrupted", err)
	}
}
