package warc

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// TestSpoolGatheredWrites checks the spool against a byte slice holding what it should:
// small writes gathered in memory, large ones written through, marks and truncations, and
// sections read at every point, including bytes not yet in the file.
func TestSpoolGatheredWrites(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		sp, err := NewSpool(t.TempDir(), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		var spans []Span
		for step := range 400 {
			switch op := rng.IntN(10); {
			case op < 6: // a write, mostly small, sometimes past the buffer
				n := rng.IntN(300)
				if rng.IntN(20) == 0 {
					n = spoolBuffer + rng.IntN(3*spoolBuffer)
				}
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				mk := sp.Mark()
				if k, err := sp.Write(p); err != nil || k != n {
					t.Fatalf("seed %d step %d: Write = %d, %v", seed, step, k, err)
				}
				want = append(want, p...)
				spans = append(spans, sp.Since(mk))
			case op < 7 && len(want) > 0: // drop a tail
				m := int64(rng.IntN(len(want) + 1))
				sp.Truncate(m)
				want = want[:m]
				kept := spans[:0]
				for _, s := range spans {
					if s.Off+s.N <= m {
						kept = append(kept, s)
					}
				}
				spans = kept
			default: // read a span written earlier
				if len(spans) == 0 {
					continue
				}
				s := spans[rng.IntN(len(spans))]
				got, err := io.ReadAll(sp.Section(s))
				if err != nil || !bytes.Equal(got, want[s.Off:s.Off+s.N]) {
					t.Fatalf("seed %d step %d: section %+v: %d bytes, %v; not what was written", seed, step, s, len(got), err)
				}
			}
			if sp.Mark() != int64(len(want)) {
				t.Fatalf("seed %d step %d: Mark %d, want %d", seed, step, sp.Mark(), len(want))
			}
		}
		got, err := io.ReadAll(sp.Section(Span{0, int64(len(want))}))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("seed %d: the whole spool differs (%d bytes, want %d, %v)", seed, len(got), len(want), err)
		}
		sp.Close()
	}
}

// TestSpoolReadsWhileWriting reads sections from other goroutines while one goroutine
// writes, as the import's readers do (run with -race).
func TestSpoolReadsWhileWriting(t *testing.T) {
	sp, err := NewSpool(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	spans := make(chan Span, 64)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range spans {
				got, err := io.ReadAll(sp.Section(s))
				if err != nil || len(got) != int(s.N) || (s.N > 0 && (got[0] != byte(s.Off) || got[len(got)-1] != byte(s.Off))) {
					select {
					case errs <- "a section read while writing differs":
					default:
					}
				}
			}
		}()
	}
	for i := range 3000 {
		mk := sp.Mark()
		p := bytes.Repeat([]byte{byte(mk)}, 1+i%700)
		if _, err := sp.Write(p); err != nil {
			t.Fatal(err)
		}
		spans <- sp.Since(mk)
	}
	close(spans)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
}

// TestSpoolLimit: a write past the limit is refused whole, gathered or not.
func TestSpoolLimit(t *testing.T) {
	sp, err := NewSpool(t.TempDir(), 100)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := sp.Write(make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Write(make([]byte, 41)); err != ErrSpoolFull {
		t.Fatalf("a write past the limit: %v, want ErrSpoolFull", err)
	}
	if sp.Mark() != 60 {
		t.Fatalf("Mark %d after a refused write, want 60", sp.Mark())
	}
}

// TestSpoolGatheredWriteFails: when gathered bytes cannot reach the file, a read of them
// fails with the write's error (never zeros or stale bytes), and so does every later write.
func TestSpoolGatheredWriteFails(t *testing.T) {
	sp, err := NewSpool(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := sp.Write([]byte("gathered, not yet in the file")); err != nil {
		t.Fatal(err)
	}
	sp.f.Close() // the file fails every write from now on
	if b, err := sp.ReadPrefix(sp.Since(0), 100); err == nil || !strings.Contains(err.Error(), "write spool") {
		t.Fatalf("read of gathered bytes that could not be written: %q, %v; want the write's error", b, err)
	}
	if _, err := sp.Write([]byte("more")); err == nil || !strings.Contains(err.Error(), "write spool") {
		t.Fatalf("write after a failed one: %v; want the first write's error", err)
	}
}
