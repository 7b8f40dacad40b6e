package replay

import (
	"fmt"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/rules"
)

// TestLookupServedMemo checks that the memo of lookup results gives, for every request,
// the result the lookup itself gives (exact, search, fuzzy, blocked, miss, HEAD, a query
// or a body that changes the answer), also when served again (by lookupServed and by
// lookupServedURL, from the URL's bytes) and from many goroutines at once (run with -race), for requests of one URL with other methods, content types and
// types too, and that it keeps neither requests with a body nor requests
// longer than maxMemoKey (a client controls its URLs).
func TestLookupServedMemo(t *testing.T) {
	ix := shopIndex(t)
	long := "https://www.shop.test/s?k=" + strings.Repeat("a", maxMemoKey)
	reqs := []rules.Request{
		req("GET", "https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss", "", ""),
		req("GET", "https://www.shop.test/s?k=airpods+pro&page=2", "", ""),
		req("GET", "https://m.shop.test/s?k=airpods+pro", "", ""),
		req("HEAD", "https://www.shop.test/s?k=usb+c+cable", "", ""),
		req("GET", "https://www.google-analytics.com/collect?v=1", "", ""),
		req("GET", "https://www.shop.test/nothing/here.js", "", ""),
		req("POST", "https://www.shop.test/s", "k=usb+c+cable", "application/x-www-form-urlencoded"),
		req("GET", long, "", ""),
		// the first URL again by another method, content type and type: kept apart
		req("HEAD", "https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss", "", ""),
		req("GET", "https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss", "", "text/plain"),
		func() rules.Request {
			r := req("GET", "https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss", "", "")
			r.Type = TypeDocument
			return r
		}(),
	}
	want := make([]Result, len(reqs))
	urls := make([]string, len(reqs))
	for i, r := range reqs {
		r.URL = NormalizeURL(r.URL)
		reqs[i] = r
		urls[i] = r.URL.String()
		want[i], _ = ix.lookupNormalized(r, false)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 3; round++ {
				for i, r := range reqs {
					m := ix.lookupServed(r, urls[i])
					if (round+i)%2 == 1 { // also by the URL's bytes
						m = ix.lookupServedURL(r, []byte(urls[i]))
					}
					got, key, u := m.res, m.keyStr, m.url
					if u != urls[i] {
						t.Errorf("round %d: lookupServed's URL %q, given %q", round, u, urls[i])
					}
					if !reflect.DeepEqual(got, want[i]) {
						t.Errorf("round %d, %s %s: memoized %+v, lookup %+v", round, r.Method, urls[i][:min(len(urls[i]), 80)], got, want[i])
					}
					if key != want[i].Key.String() {
						t.Errorf("round %d, %s %s: key string %q, want %q", round, r.Method, urls[i][:min(len(urls[i]), 80)], key, want[i].Key.String())
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range reqs {
		k := resultKey{r.Method, r.URL.String(), r.ContentType, r.Type}
		m, first := ix.results.load(k.url)
		_, other := ix.otherResults.load(k)
		if (first && m.resultKey == k || other) && (len(k.url) > maxMemoKey || k.method == "POST") {
			t.Errorf("memo keeps %s %.80s (%d bytes)", k.method, k.url, len(k.url))
		}
	}
	if n := ix.results.len() + ix.otherResults.len(); n != len(reqs)-2 {
		t.Errorf("memo holds %d results, want %d (every bodiless request under maxMemoKey)", n, len(reqs)-2)
	}
}

// TestLookupServedMemoBounded fills the memo past maxResults: it starts again empty and
// never holds more.
func TestLookupServedMemoBounded(t *testing.T) {
	ix := shopIndex(t)
	for i := 0; i < maxResults+10; i++ {
		r := req("GET", fmt.Sprintf("https://www.shop.test/p/%d", i), "", "")
		r.URL = NormalizeURL(r.URL)
		ix.lookupServed(r, r.URL.String())
	}
	n := ix.results.len() + ix.otherResults.len()
	if n == 0 || n > maxResults {
		t.Errorf("memo holds %d results, want 1 to %d", n, maxResults)
	}
}

// TestURLString checks urlString against url.URL.String on the URLs NormalizeURL returns,
// for the URLs of the shipped tasks' kinds and ones that need escaping or take String's
// other paths.
func TestURLString(t *testing.T) {
	for _, raw := range urlStringSeeds {
		checkURLString(t, raw)
	}
}

var urlStringSeeds = []string{
	"https://www.shop.test/s?k=AirPods+Pro&ref=nb_sb_noss",
	"http://Shop.TEST:80/a/b;c=d/@x:y$z?q=1#frag",
	"https://shop.test:8443",
	"https://shop.test/?",
	"https://[::1]:8080/p",
	"https://user:pw@shop.test/p",
	"https://shop.test/a%2Fb/c",
	"https://shop.test/a b/ü?x=ü",
	"https://shop.test/a!b*c'(d)",
	"https://shop.test/a!b",
	"https://shop.test/100%25/x?y",
	"https://xn--bcher-kva.test/p",
	"https://bücher.test./p?q",
	"http://shop.test/%zz",
	"mailto:x@y",
	"https://shop.test/a?b#c",
}

func checkURLString(t *testing.T, raw string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	n := NormalizeURL(u)
	if got, want := urlString(n), n.String(); got != want {
		t.Errorf("%q: urlString %q, String %q", raw, got, want)
	}
	if got, want := string(appendURL([]byte("x"), n)), "x"+n.String(); got != want {
		t.Errorf("%q: appendURL after x %q, want %q", raw, got, want)
	}
}

// FuzzURLString: urlString, and appendURL's bytes, are String on any URL NormalizeURL
// returns.
func FuzzURLString(f *testing.F) {
	for _, s := range urlStringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkURLString(t, raw)
		if u, err := url.ParseRequestURI(raw); err == nil {
			u.Scheme, u.Host = "https", "shop.test"
			n := NormalizeURL(u)
			if got, want := urlString(n), n.String(); got != want {
				t.Errorf("request URI %q: urlString %q, String %q", raw, got, want)
			}
			if got, want := string(appendURL(nil, n)), n.String(); got != want {
				t.Errorf("request URI %q: appendURL %q, String %q", raw, got, want)
			}
		}
	})
}

// TestLookupServedMemoMemory fills the lookup memos with the longest URLs they keep, each
// asked twice (by GET, then by HEAD: the second goes to the memo of other requests) with
// its log line kept in its lineMemo, and checks what stays on the heap: the memos are bound
// by count and key size, whatever URLs a client sends. A line whose middle is over
// maxMemoLine is not kept.
func TestLookupServedMemoMemory(t *testing.T) {
	ix := shopIndex(t)
	at := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pad := strings.Repeat("a", maxMemoKey-80)
	// one less than each memo holds: the next would empty it
	for i := 0; i < maxResults-1+maxResults/4-1; i++ {
		method := "GET"
		n := i
		if i >= maxResults-1 {
			method, n = "HEAD", i-(maxResults-1)
		}
		r := req(method, fmt.Sprintf("https://www.shop.test/p/%d?q=%s", n, pad), "", "")
		r.URL = NormalizeURL(r.URL)
		u := r.URL.String()
		m := ix.lookupServed(r, u)
		res, key, memo := m.res, m.keyStr, m.line
		if memo == nil {
			t.Fatalf("%s %d bytes: not memoized", method, len(u))
		}
		line := LogLine{Method: method, URL: u, Key: key, Type: TypeOther, Source: res.Source, Status: 404}
		if _, ok := appendLogLine(nil, line, &at, memo); !ok {
			t.Fatal("line not encoded")
		}
		if memo.last.Load() != nil && len(u)+len(key) > maxMemoLine { // the middle holds both
			t.Fatalf("a middle of over %d bytes was kept", len(u)+len(key))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("memos of %d + %d lookups of %d-byte URLs: %d MiB", ix.results.len(), ix.otherResults.len(), len(pad)+40, grown>>20)
	if ix.results.len() != maxResults-1 || ix.otherResults.len() != maxResults/4-1 {
		t.Errorf("memos hold %d and %d, want %d and %d", ix.results.len(), ix.otherResults.len(), maxResults-1, maxResults/4-1)
	}
	if grown > 96<<20 {
		t.Errorf("the memos took %d MiB, over 96", grown>>20)
	}
	runtime.KeepAlive(ix)
}

// FuzzLowerHost compares lowerHost with what it stands for: strings.ToLower, and whether
// the result holds no rune from U+0080 on (an invalid byte reads as U+FFFD).
func FuzzLowerHost(f *testing.F) {
	for _, s := range []string{"", "a.test", "A.Test", "xn--bcher-kva.example", "bücher.example", "BÜCHER.example",
		"\u212a.test", "K\u212a", "\xff.test", "[::1]", "a.test."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.ToLower(s)
		wantASCII := !strings.ContainsFunc(want, func(r rune) bool { return r >= 0x80 })
		got, ascii := lowerHost(s)
		if got != want || ascii != wantASCII {
			t.Errorf("lowerHost(%q) = %q, %v; want %q, %v", s, got, ascii, want, wantASCII)
		}
	})
}
