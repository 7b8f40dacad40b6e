package replay

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// Benchmarks of issue 9 (bench/README.md): lookups at 100,000 entries and the work of
// the request handler per request. Run with
//
//	go test ./replay -run '^$' -bench 'Lookup100k|Handler' -benchmem
//
// Each reports cpu-ns/op, the process's CPU time per operation (getrusage), which other
// jobs on a shared machine disturb less than wall time.

var (
	bench100kOnce sync.Once
	bench100k     *Index
	bench100kErr  error
)

// index100k is one index of 100,000 entries shared by the lookup benchmarks: 90,000
// pages of 900 paths with 100 query variants each, and 10,000 searches of one search
// endpoint (bigSearchIndex), under the default rules plus the test site's.
func index100k(b *testing.B) *Index {
	bench100kOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				bench100kErr = fmt.Errorf("%v", r)
			}
		}()
		bench100k = bigSearchIndex(b, 100000)
	})
	if bench100kErr != nil {
		b.Fatal(bench100kErr)
	}
	return bench100k
}

// cpuTime is the CPU time (user+system) of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs f b.N times (b.Loop) and reports cpu-ns/op besides ns/op.
func loopCPU(b *testing.B, f func()) {
	b.ReportAllocs()
	c0 := cpuTime()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(cpuTime()-c0)/float64(n), "cpu-ns/op")
	}
}

func BenchmarkLookup100k(b *testing.B) {
	ix := index100k(b)
	cases := []struct {
		name, url string
		want      Source
	}{
		{"exact", "https://big.test/p512/item?id=51234&sort=asc&page=1", SourceExact},
		{"exact-tracking", "https://big.test/p512/item?id=51234&sort=asc&page=1&utm_source=news&gclid=x1", SourceExact},
		{"fuzzy", "https://big.test/p512/item?id=999999&sort=asc&page=3", SourceFuzzy},
		{"search", "https://big.test/s?q=W176X+w234x+W411X&page=9", SourceSearch},
		{"search-prefix", "https://big.test/s?q=w23", SourceSearch},
		{"miss", "https://other.test/nothing/here.js", SourceMiss},
	}
	for _, c := range cases {
		r := req("GET", c.url, "", "")
		if res := ix.Lookup(r); res.Source != c.want {
			b.Fatalf("%s: source %s, want %s", c.url, res.Source, c.want)
		}
		b.Run(c.name, func(b *testing.B) {
			loopCPU(b, func() {
				if res := ix.Lookup(r); res.Source != c.want {
					b.Fatal(res.Source)
				}
			})
		})
	}
}

// BenchmarkLookup100kNoMemo is BenchmarkLookup100k with the route memo emptied before
// every lookup: the cost of the first request of each method, host and path.
func BenchmarkLookup100kNoMemo(b *testing.B) {
	ix := index100k(b)
	for _, c := range []struct {
		name, url string
		want      Source
	}{
		{"exact", "https://big.test/p512/item?id=51234&sort=asc&page=1", SourceExact},
		{"fuzzy", "https://big.test/p512/item?id=999999&sort=asc&page=3", SourceFuzzy},
		{"search", "https://big.test/s?q=W176X+w234x+W411X&page=9", SourceSearch},
	} {
		r := req("GET", c.url, "", "")
		b.Run(c.name, func(b *testing.B) {
			loopCPU(b, func() {
				ix.routeMu.Lock()
				ix.routes = nil
				ix.routeMu.Unlock()
				if res := ix.Lookup(r); res.Source != c.want {
					b.Fatal(res.Source)
				}
			})
		})
	}
}

// BenchmarkKeyOfRequest is the key computation alone, as Lookup does it, for the exact
// case above.
func BenchmarkKeyOfRequest(b *testing.B) {
	ix := index100k(b)
	r := req("GET", "https://big.test/p512/item?id=51234&sort=asc&page=1", "", "")
	loopCPU(b, func() { _ = ix.Rules().Key(r).String() })
}

// BenchmarkNewIndex100k builds the index of 100,000 entries (bundle already open).
func BenchmarkNewIndex100k(b *testing.B) {
	ix := index100k(b)
	loopCPU(b, func() {
		if _, err := NewIndex(ix.Bundle(), ix.Rules()); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkHandler is the proxy's request handler without the network: lookup, reading
// the recorded response from the WARC and writing it, the log line queued to a writer.
// allocs/op is the handler's allocations per request.
func BenchmarkHandler(b *testing.B) {
	s := handlerBenchServer(b)
	r := httptest.NewRequest(http.MethodGet, "https://shop.test/p/512.html", nil)
	w := &discardWriter{h: http.Header{}}
	loopCPU(b, func() {
		if err := serveBench(s, w, r); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkHandlerParallel is BenchmarkHandler from GOMAXPROCS goroutines at once, each
// asking for its own pages: what the locks and memos shared by every connection cost when
// requests are answered side by side. cpu-ns/op is the process's CPU per request.
func BenchmarkHandlerParallel(b *testing.B) {
	s := handlerBenchServer(b)
	var next atomic.Int64
	b.ReportAllocs()
	c0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1)
		var rs []*http.Request
		for j := range 8 {
			rs = append(rs, httptest.NewRequest(http.MethodGet, fmt.Sprintf("https://shop.test/p/%d.html", (i*97+int64(j)*13)%1000), nil))
		}
		w := &discardWriter{h: http.Header{}}
		for k := 0; pb.Next(); k++ {
			if err := serveBench(s, w, rs[k%len(rs)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// handlerBenchServer is a Server over a recording of 1,000 pages of 8 KiB, its log
// discarded.
func handlerBenchServer(b *testing.B) *Server {
	exs := make([]ex, 1000)
	for i := range exs {
		exs[i] = ex{method: "GET", url: fmt.Sprintf("https://shop.test/p/%d.html", i), status: 200,
			header: []string{"Content-Type: text/html", "Cache-Control: max-age=60"}, body: make([]byte, 8<<10)}
	}
	bd := writeTestBundle(b, b.TempDir(), recording.Manifest{}, exs)
	rs, err := rules.Default()
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Options{Bundle: bd, Rules: rs, CA: sharedCA(b), Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// serveBench answers r into w and checks the answer: 200 with 8 KiB.
func serveBench(s *Server, w *discardWriter, r *http.Request) error {
	clear(w.h)
	w.status, w.n = 0, 0
	s.ServeHTTP(w, r)
	if w.status != 200 || w.n != 8<<10 {
		return fmt.Errorf("%s: status %d with %d bytes, want 200 with %d", r.URL, w.status, w.n, 8<<10)
	}
	return nil
}

// discardWriter is an http.ResponseWriter that keeps the status and counts the body.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header  { return w.h }
func (w *discardWriter) WriteHeader(code int) { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}
