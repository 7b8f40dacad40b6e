package replay

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// TestSmallBodyKeptOnHead checks headCache.smallBody: a payload is read from the WARC once
// and then given from its head, the same bytes to every goroutine (run with -race); a
// payload over maxCachedBody or a head with its own reader is not kept; and the payloads
// kept never come to more than maxCachedBodies bytes: once they would, every head's is
// dropped and the count starts again.
func TestSmallBodyKeptOnHead(t *testing.T) {
	var c headCache
	file := bytes.NewReader(bytes.Repeat([]byte("0123456789abcdef"), maxCachedBody/8))
	size := int64(maxCachedBody / 2)
	head := func(off int64) *responseHead { return &responseHead{ra: file, off: off, size: size} }

	h := head(16)
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got[g] = c.smallBody(h)
			}
		}()
	}
	wg.Wait()
	want := make([]byte, size)
	file.ReadAt(want, 16)
	for g, b := range got {
		if !bytes.Equal(b, want) {
			t.Fatalf("goroutine %d: %d bytes, not the payload's %d at offset 16", g, len(b), size)
		}
		if unsafe.SliceData(b) != unsafe.SliceData(got[0]) {
			t.Errorf("goroutine %d got a payload of its own: read again, not kept", g)
		}
	}
	if n := c.keptBodyBytes(); n != size {
		t.Errorf("%d bytes counted after one payload of %d", n, size)
	}

	if b := c.smallBody(&responseHead{ra: file, size: maxCachedBody + 1}); b != nil || c.keptBodyBytes() != size {
		t.Errorf("a payload over maxCachedBody: got %d bytes, %d counted", len(b), c.keptBodyBytes())
	}
	if b := c.smallBody(&responseHead{reader: strings.NewReader("x"), size: 1}); b != nil {
		t.Error("a head with its own reader: payload kept")
	}

	// fill the budget: the heads before the one that does not fit lose their payloads
	heads := []*responseHead{h}
	for len(heads) < int(maxCachedBodies/size) {
		heads = append(heads, head(int64(len(heads))))
		c.smallBody(heads[len(heads)-1])
	}
	if n := c.keptBodyBytes(); n != maxCachedBodies {
		t.Fatalf("%d payloads of %d bytes: %d counted, want %d", len(heads), size, n, maxCachedBodies)
	}
	for i, o := range heads {
		if o.small.Load() == nil {
			t.Fatalf("head %d: payload dropped before the budget was spent", i)
		}
	}
	last := head(3)
	wantLast := make([]byte, size)
	file.ReadAt(wantLast, 3)
	if b := c.smallBody(last); !bytes.Equal(b, wantLast) {
		t.Fatalf("the payload over the budget: %d bytes, not the payload at offset 3", len(b))
	}
	for i, o := range heads {
		if o.small.Load() != nil {
			t.Errorf("head %d: payload still kept after the budget was spent", i)
		}
	}
	if last.small.Load() == nil || c.keptBodyBytes() != size {
		t.Errorf("after the budget was spent: the new payload kept %v, %d bytes counted (want %d)", last.small.Load() != nil, c.keptBodyBytes(), size)
	}
	if b := c.smallBody(h); !bytes.Equal(b, want) {
		t.Errorf("a dropped payload read again: %d bytes, not the payload", len(b))
	}
}

// TestHeadFieldsInterned checks headCache.intern: heads of different entries with equal
// field names share one copy of each name, and equal short values of sharedFields one
// one-value list; a value over maxInternedValue, of a field with two values or of a field
// whose values differ from response to response (Date) keeps its own; the header keeps its
// fields and values.
func TestHeadFieldsInterned(t *testing.T) {
	var c headCache
	long := strings.Repeat("v", maxInternedValue+1)
	mk := func() http.Header {
		// each string a copy of its own, as parsed from another record
		s := func(v string) string { return string(append([]byte(nil), v...)) }
		return http.Header{
			s("Content-Type"):  {s("text/html; charset=utf-8")},
			s("Cache-Control"): {s("max-age=3600")},
			s("X-Long"):        {s(long)},
			s("Vary"):          {s("Accept"), s("Origin")},
			s("Date"):          {s("Mon, 07 Dec 2026 09:00:00 GMT")},
			s("Server"):        {s(long)},
		}
	}
	a, b := c.intern(mk()), c.intern(mk())
	if !equalHeader(a, mk()) || !equalHeader(b, mk()) {
		t.Fatalf("interned header changed: %v", a)
	}
	keyOf := func(h http.Header, name string) string {
		for k := range h {
			if k == name {
				return k
			}
		}
		return ""
	}
	for _, name := range []string{"Content-Type", "Cache-Control", "X-Long", "Vary", "Date", "Server"} {
		if unsafe.StringData(keyOf(a, name)) != unsafe.StringData(keyOf(b, name)) {
			t.Errorf("%s: two copies of the name", name)
		}
	}
	for _, name := range []string{"Content-Type", "Cache-Control"} {
		if &a[name][0] != &b[name][0] {
			t.Errorf("%s: two lists of its value", name)
		}
	}
	for _, name := range []string{"X-Long", "Vary", "Date", "Server"} {
		if &a[name][0] == &b[name][0] {
			t.Errorf("%s: a list shared that should not be", name)
		}
	}
	for i := range maxInternedValues + 10 {
		c.internValue(fmt.Sprint(i))
	}
	if n := len(c.values); n > maxInternedValues {
		t.Errorf("%d values interned, at most %d", n, maxInternedValues)
	}
	if vs := c.internValue("a value after the table is full"); len(vs) != 1 || vs[0] != "a value after the table is full" {
		t.Errorf("a value after the table is full: %q", vs)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if strings.Join(vs, "\x00") != strings.Join(b[k], "\x00") || len(vs) != len(b[k]) {
			return false
		}
	}
	return true
}

// TestServedResultKeepsHead checks that an answer served again takes its recorded head from
// the lookup's memo (servedResult.head) and gives the same answer: the head stored there
// is the head cache's, the payload the one kept on it, and the answers' status, fields and
// bytes equal the first's; a head over maxMemoHeadBytes is not kept in the memo and its
// answers are the same.
func TestServedResultKeepsHead(t *testing.T) {
	exs := []ex{
		{method: "GET", url: "https://shop.test/a.html", status: 200,
			header: []string{"Content-Type: text/html", "Cache-Control: max-age=60"}, body: []byte("<p>a</p>")},
		{method: "GET", url: "https://shop.test/b.css", status: 200,
			header: []string{"Content-Type: text/css", "Cache-Control: max-age=60"}, body: []byte("b{}")},
		{method: "GET", url: "https://shop.test/big.txt", status: 200, // a head over maxMemoHeadBytes
			header: []string{"Content-Type: text/plain", "X-Big: " + strings.Repeat("b", maxMemoHeadBytes)}, body: []byte("big")},
	}
	bd := writeTestBundle(t, t.TempDir(), recording.Manifest{}, exs)
	rs, err := rules.Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Bundle: bd, Rules: rs, CA: sharedCA(t), Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	serve := func(u string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		return w
	}
	for i, e := range exs {
		first := serve(e.url)
		m, ok := s.ix.results.load(urlString(NormalizeURL(mustParse(t, e.url))))
		if !ok || m.res.Entry == nil {
			t.Fatalf("%s: no memoized result with an entry", e.url)
		}
		h := m.head.Load()
		big := strings.HasSuffix(e.url, "big.txt")
		if big {
			if h != nil {
				t.Errorf("%s: the memo keeps a head of %d bytes, over maxMemoHeadBytes", e.url, h.bytes)
			}
			if again := serve(e.url); again.Code != 200 || again.Body.String() != "big" || again.Header().Get("X-Big") == "" || first.Body.String() != "big" {
				t.Errorf("%s: served %d %q, again %d %q", e.url, first.Code, first.Body, again.Code, again.Body)
			}
			continue
		}
		if h == nil {
			t.Fatalf("%s: the memo keeps no head after an answer", e.url)
		}
		if cached, err := s.heads.get(s.b, m.res.Entry); err != nil || cached != h {
			t.Errorf("%s: the memo's head is not the head cache's (%v)", e.url, err)
		}
		again := serve(e.url)
		if first.Code != 200 || again.Code != first.Code || !reflect.DeepEqual(again.Header(), first.Header()) || again.Body.String() != string(exs[i].body) || again.Body.String() != first.Body.String() {
			t.Errorf("%s: served again %d %v %q, first %d %v %q", e.url, again.Code, again.Header(), again.Body, first.Code, first.Header(), first.Body)
		}
		if p := h.small.Load(); p == nil || string(*p) != string(exs[i].body) {
			t.Errorf("%s: payload not kept on the head", e.url)
		}
		if m.head.Load() != h {
			t.Errorf("%s: the memo's head was replaced", e.url)
		}
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestHeadCacheByteBound checks that the parsed heads kept are bounded in bytes as well as
// in number (a recording's head may carry up to a MiB of fields): a head that would take
// the cache over its byte bound empties it first, so the bytes counted never pass the
// bound; a head kept is given back for its entry; and a lookup's memo does not keep a head
// over maxMemoHeadBytes, so the memos' heads stay bounded too.
func TestHeadCacheByteBound(t *testing.T) {
	c := headCache{maxBytes: 100 << 10}
	head := func(n int) *responseHead {
		h := &responseHead{header: http.Header{"X-Big": {strings.Repeat("b", n)}}}
		h.bytes = headBytes(h)
		return h
	}
	entries := make([]*recording.Entry, 40)
	for i := range entries {
		entries[i] = &recording.Entry{ID: fmt.Sprintf("e%03d", i)}
		h := head(10 << 10)
		if got := c.keep(entries[i], h); got != h {
			t.Fatalf("entry %d: the head kept is not the one stored", i)
		}
		if c.headBytes > c.maxBytes {
			t.Fatalf("entry %d: %d bytes of heads kept, over the bound of %d", i, c.headBytes, c.maxBytes)
		}
		if kept, ok := c.m.load(entries[i]); !ok || kept != h {
			t.Fatalf("entry %d: its head is not in the cache right after it was kept", i)
		}
	}
	if n := c.m.len(); n*(10<<10) > c.maxBytes+(10<<10) {
		t.Errorf("%d heads of 10 KiB kept under a bound of %d bytes", n, c.maxBytes)
	}
	if _, ok := c.m.load(entries[0]); ok {
		t.Error("the first head is still kept after the bound was passed many times over")
	}
	if headBytes(head(10<<10)) < 10<<10 || headBytes(head(0)) > maxMemoHeadBytes {
		t.Errorf("headBytes: %d for 10 KiB of fields, %d for none", headBytes(head(10<<10)), headBytes(head(0)))
	}
}

// TestNewIndexOfAnotherBundle: a Server is not made over an index of another bundle than
// its own (the answers are read from its bundle at the index's offsets, and the heads the
// index's memo keeps are the index's bundle's), while two servers may share one.
func TestNewIndexOfAnotherBundle(t *testing.T) {
	exs := []ex{{method: "GET", url: "https://shop.test/a.html", status: 200, header: []string{"Content-Type: text/html"}, body: []byte("a")}}
	b1 := writeTestBundle(t, t.TempDir(), recording.Manifest{}, exs)
	b2 := writeTestBundle(t, t.TempDir(), recording.Manifest{}, exs)
	rs, err := rules.Default()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndex(b1, rs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Bundle: b2, Index: ix, CA: sharedCA(t), Log: io.Discard}); err == nil || !strings.Contains(err.Error(), "another bundle") {
		t.Errorf("an index of another bundle: %v, want an error", err)
	}
	for range 2 {
		s, err := New(Options{Bundle: b1, Index: ix, CA: sharedCA(t), Log: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
