package syncwriter

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// TestWholeWrites: writes from many goroutines arrive whole, none lost (run with -race).
func TestWholeWrites(t *testing.T) {
	var b bytes.Buffer
	w := New(&b)
	line := strings.Repeat("x", 1000) + "\n"
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				w.Write([]byte(line))
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for i, l := range lines {
		if l != line[:1000] {
			t.Fatalf("line %d is %d bytes, not one whole write", i, len(l))
		}
	}
}
