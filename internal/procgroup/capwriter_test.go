package procgroup

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

func TestCapWriter(t *testing.T) {
	var b bytes.Buffer
	c := NewCapWriter(&b, 5)
	for _, s := range []string{"abc", "def", "ghi"} {
		if n, err := c.Write([]byte(s)); n != 3 || err != nil {
			t.Fatal(n, err)
		}
	}
	if b.String() != "abcde" {
		t.Errorf("passed on %q", b.String())
	}
	if w, total := c.Counts(); w != 5 || total != 9 {
		t.Errorf("Counts = %d, %d", w, total)
	}
	if w, total, err := c.Stop(); w != 5 || total != 9 || err != nil {
		t.Errorf("Stop = %d, %d, %v", w, total, err)
	}
	c.Write([]byte("after"))
	if _, total := c.Counts(); total != 9 || b.String() != "abcde" {
		t.Errorf("a write after Stop counted or passed on: %d, %q", total, b.String())
	}
}

// failWriter takes n bytes, then fails.
type failWriter struct{ n int }

var errFull = errors.New("no space left on device")

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// TestCapWriterKeepsDraining: a failing writer never fails the copy from the child's pipe.
func TestCapWriterKeepsDraining(t *testing.T) {
	fw := &failWriter{n: 4}
	c := NewCapWriter(fw, 100)
	for i := 0; i < 3; i++ {
		if n, err := c.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	if w, total := c.Counts(); w != 4 || total != 9 {
		t.Errorf("Counts = %d, %d", w, total)
	}
	if !errors.Is(c.Err(), errFull) {
		t.Errorf("Err = %v", c.Err())
	}
}

func TestCapWriterConcurrent(t *testing.T) {
	var b bytes.Buffer
	c := NewCapWriter(&b, 1000)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				c.Write([]byte("xy"))
			}
		}()
	}
	wg.Wait()
	if w, total := c.Counts(); w != 1000 || total != 1600 || b.Len() != 1000 {
		t.Errorf("Counts = %d, %d; passed on %d", w, total, b.Len())
	}
}
