package browser

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
)

// lockedBuffer is a strings.Builder safe for the test and Run writing at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until w holds a line matching re.
func waitFor(t *testing.T, w *lockedBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line matching %s in:\n%s", re, w.String())
	return nil
}

var (
	profileLine = regexp.MustCompile(`pab browser: profile (\S+)\n`)
	cdpLine     = regexp.MustCompile(`pab browser: CDP ws://127\.0\.0\.1:\d+/devtools/browser/\S+\npab browser: press Ctrl-C to stop\n`)
)

// TestRunReplayStopped runs a real headless Chromium: Run prints its profile and CDP
// endpoint, returns when the replay stops (sending the replay's result back), and leaves
// no profile behind.
func TestRunReplayStopped(t *testing.T) {
	exe, err := Find("")
	if err != nil {
		testtool.Missing(t, "chromium not found: %v", err)
	}
	var out lockedBuffer
	stopped := make(chan error, 1)
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), exe, Options{}, "", stopped, &out) }()
	profile := waitFor(t, &out, profileLine)[1]
	waitFor(t, &out, cdpLine)
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
	var out lockedBuffer
	profile := filepath.Join(t.TempDir(), "profile")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, exe, Options{Profile: profile}, "", nil, &out) }()
	waitFor(t, &out, cdpLine)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after ctx ended = %v, want nil", err)
	}
	if !strings.HasPrefix(out.String(), "pab browser: profile "+profile+"\n") {
		t.Errorf("output %q does not start with the given profile", out.String())
	}
	if _, err := os.Stat(profile); err != nil {
		t.Errorf("a given profile was removed: %v", err)
	}
	if err := Run(ctx, exe, Options{}, "", nil, io.Discard); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run with an ended ctx = %v, want ErrInterrupted", err)
	}
}
