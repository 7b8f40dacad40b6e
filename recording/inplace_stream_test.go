package recording

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
)

// streamRecording packs a format 3 recording of n responses, each a body of size bytes of
// its own (pseudo-random text, so deflate has work), and returns it opened in place with
// the bodies.
func streamRecording(t *testing.T, n, size int) (*Bundle, [][]byte) {
	t.Helper()
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \n"
	var xs []handExchange
	var bodies [][]byte
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i), 7))
		body := make([]byte, size)
		for k := range body {
			body[k] = alphabet[r.IntN(len(alphabet))]
		}
		bodies = append(bodies, body)
		xs = append(xs, handExchange{id: fmt.Sprintf("e%06d", i+1), url: fmt.Sprintf("https://example.test/big/%d", i),
			head: "HTTP/1.1 200 OK\r\nContent-Type: text/plain", body: string(body)})
	}
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, xs)
	rec := filepath.Join(t.TempDir(), "tasks", "big", "recording")
	if err := Pack(bundleDir, rec); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if b.z == nil {
		t.Fatal("the recording was not opened in place")
	}
	return b, bodies
}

// streamOf is what replay streams for a response: StreamSection over its body's section.
func streamOf(t *testing.T, r *Response) io.Reader {
	t.Helper()
	sr, ok := r.Body.(*io.SectionReader)
	if !ok {
		t.Fatalf("Response.Body is a %T, not an *io.SectionReader", r.Body)
	}
	ra, off, n := sr.Outer()
	return StreamSection(ra, off, n)
}

// TestInPlaceStreamOpensLinear: interleaved large streams, more of them than the archive
// parks inflaters for, open each member at most twice (its head prefix, and its body when
// the prefix's inflater was evicted), not once per read: member opens grow linearly with
// the streams (a review measured 48 then 576 member opens for 16 then 24 streams).
func TestInPlaceStreamOpensLinear(t *testing.T) {
	const size = 3 * smallMember
	for _, n := range []int{4, 16, 24, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b, bodies := streamRecording(t, n, size)
			before := b.z.opens.Load()
			streams := make([]io.Reader, n)
			for i := range n {
				r, err := b.Response(&b.Entries[i])
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = streamOf(t, r)
			}
			if heads := b.z.opens.Load() - before; heads != int64(n) {
				t.Errorf("%d responses' heads opened %d members, want %d (one head prefix each)", n, heads, n)
			}
			got := make([]bytes.Buffer, n)
			buf := make([]byte, 7000)
			for live := n; live > 0; { // round robin: every stream one read a turn
				live = 0
				for i, s := range streams {
					if s == nil {
						continue
					}
					k, err := s.Read(buf)
					got[i].Write(buf[:k])
					switch err {
					case nil:
						live++
					case io.EOF:
						streams[i] = nil
					default:
						t.Fatalf("stream %d: %v", i, err)
					}
				}
			}
			for i := range n {
				if !bytes.Equal(got[i].Bytes(), bodies[i]) {
					t.Fatalf("stream %d: %d bytes differ from the recorded %d", i, got[i].Len(), len(bodies[i]))
				}
			}
			opens := b.z.opens.Load() - before
			if opens > int64(2*n) {
				t.Errorf("%d interleaved streams opened %d members, want at most %d", n, opens, 2*n)
			}
			if n <= maxIdleCursors && opens != int64(n) {
				t.Errorf("%d interleaved streams opened %d members, want %d (the head's inflater continues)", n, opens, n)
			}
			t.Logf("%d streams: %d member opens", n, opens)
		})
	}
}

// TestInPlaceStreamsConcurrent: goroutines stream large bodies at once, several streams of
// the same member among them, each through its own inflater; every body arrives whole and
// the member opens stay linear (run with -race).
func TestInPlaceStreamsConcurrent(t *testing.T) {
	const n, copies = 12, 3
	b, bodies := streamRecording(t, n, 2*smallMember+123)
	before := b.z.opens.Load()
	var wg sync.WaitGroup
	errs := make(chan error, n*copies)
	for g := range n * copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g % n
			r, err := b.Response(&b.Entries[i])
			if err != nil {
				errs <- err
				return
			}
			sr := r.Body.(*io.SectionReader)
			ra, off, size := sr.Outer()
			got, err := io.ReadAll(StreamSection(ra, off, size))
			if err != nil || !bytes.Equal(got, bodies[i]) {
				errs <- fmt.Errorf("stream of entry %d: %d bytes, %v", i, len(got), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if opens := b.z.opens.Load() - before; opens > 2*n*copies {
		t.Errorf("%d concurrent streams opened %d members, want at most %d", n*copies, opens, 2*n*copies)
	}
}

// TestStreamSectionNotInPlace: over any other reader (an unpacked bundle's data.warc, a
// span outside the archive) StreamSection is a plain section reader.
func TestStreamSectionNotInPlace(t *testing.T) {
	r := StreamSection(bytes.NewReader([]byte("0123456789")), 2, 5)
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "23456" {
		t.Errorf("got %q, %v; want \"23456\"", got, err)
	}
	b, _ := streamRecording(t, 1, 2*smallMember)
	if _, ok := StreamSection(b.z, b.z.size-1, 2).(*io.SectionReader); !ok {
		t.Errorf("a span past the archive's end was not handed to io.SectionReader")
	}
}
