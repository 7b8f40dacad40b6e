package iobuf

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// onlyReader hides a reader's WriteTo, so Copy uses its buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides a writer's ReadFrom.
type onlyWriter struct{ io.Writer }

func TestCopy(t *testing.T) {
	src := strings.Repeat("0123456789abcdef", 10_000) // 160,000 bytes: several buffers
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst bytes.Buffer
			n, err := Copy(onlyWriter{&dst}, onlyReader{strings.NewReader(src)})
			if err != nil || n != int64(len(src)) || dst.String() != src {
				t.Errorf("Copy = %d, %v; copied %d bytes equal %v", n, err, dst.Len(), dst.String() == src)
			}
		}()
	}
	wg.Wait()
}

func TestCopyReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("abc"), &errReader{boom})
	var dst bytes.Buffer
	n, err := Copy(onlyWriter{&dst}, onlyReader{r})
	if !errors.Is(err, boom) || n != 3 || dst.String() != "abc" {
		t.Fatalf("Copy = %d, %v, %q; want 3, boom, abc", n, err, dst.String())
	}
}

func BenchmarkCopySmall(b *testing.B) {
	src := strings.Repeat("x", 700) // one small record
	b.ReportAllocs()
	for b.Loop() {
		Copy(onlyWriter{io.Discard}, onlyReader{strings.NewReader(src)})
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }
