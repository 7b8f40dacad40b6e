package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// hugeJSONBody is a valid JSON body of n bytes whose canonical form, as the key holds it,
// doubles when the log escapes it: one string of escaped quotes.
func hugeJSONBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`["`)
	for b.Len()+4 <= n {
		b.WriteString(`\"`)
	}
	for b.Len()+2 < n {
		b.WriteString("x")
	}
	b.WriteString(`"]`)
	return b.Bytes()
}

// TestLogLineBoundRealProxy: a POST with a 4 MiB JSON body to a 1 MiB URL, through a real
// proxy over HTTPS, logs one line within MaxLogLine, marked truncated, with the original
// sizes; the log, its tail and the stats reader all read it.
func TestLogLineBoundRealProxy(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	body := hugeJSONBody(4 << 20)
	if !json.Valid(body) || len(body) != 4<<20 {
		t.Fatalf("test body: %d bytes, valid %v", len(body), json.Valid(body))
	}
	longURL := "https://site.test/basket/add/?ref=" + strings.Repeat("a", 1<<20)
	tp.get(t, "https://site.test/", nil)
	if r := tp.do(t, "POST", longURL, map[string]string{"Content-Type": "application/json"}, body); r.status != http.StatusNotFound {
		t.Errorf("POST: status %d", r.status)
	}
	// A method too long to keep.
	longMethod := strings.Repeat("M", 200)
	tp.do(t, longMethod, "https://site.test/x", nil, nil)
	tail := tp.get(t, "http://rr.control/log?tail=10", nil)
	tp.close(t)

	raw := tp.log.Bytes()
	for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) > MaxLogLine {
			t.Errorf("line %d: %d bytes, over the bound %d", i+1, len(line), MaxLogLine)
		}
	}
	if !bytes.Equal(tail.body, raw) {
		t.Errorf("the tail (%d bytes) is not the log (%d bytes)", len(tail.body), len(raw))
	}
	lines, err := ReadLog(bytes.NewReader(raw), "log")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	if l := lines[0]; l.Truncated || l.URLSize != 0 || l.BodySize != 0 {
		t.Errorf("short line marked: %+v", l)
	}
	l := lines[1]
	if !l.Truncated || l.Method != "POST" || l.Source != SourceMiss || l.Status != 404 {
		t.Errorf("POST line: truncated %v method %q source %q status %d", l.Truncated, l.Method, l.Source, l.Status)
	}
	if l.URLSize != len(longURL) || !strings.HasPrefix(longURL, l.URL) || len(l.URL) > MaxLogURL || len(l.URL) < MaxLogURL/2 {
		t.Errorf("URL: %d bytes kept of %d (url_size %d)", len(l.URL), len(longURL), l.URLSize)
	}
	if l.KeySize < len(body) || len(l.Key) > MaxLogKey || !strings.HasPrefix(l.Key, "POST site.test/basket/add/?ref=aaa") {
		t.Errorf("key: %d bytes kept, key_size %d", len(l.Key), l.KeySize)
	}
	if l.BodySize != int64(len(body)) {
		t.Errorf("body_size %d, want %d", l.BodySize, len(body))
	}
	if m := lines[2]; !m.Truncated || len(m.Method) != MaxLogMethod || !strings.HasPrefix(longMethod, m.Method) {
		t.Errorf("long method: %q truncated %v", m.Method, m.Truncated)
	}
	st, err := SummarizeLog(bytes.NewReader(raw), "log", nil)
	if err != nil || st.Total != 3 || st.Truncated != 2 || st.Unreadable != 0 || st.BySource[SourceMiss] != 2 {
		t.Errorf("stats: %+v %v", st.Counts, err)
	}
}

// TestEncodeLogLineBound: whatever the fields hold (escapes that grow six-fold, invalid
// UTF-8, U+2028), the line stays within MaxLogLine, is valid JSON and reads back with every
// field a prefix of what was logged.
func TestEncodeLogLineBound(t *testing.T) {
	nasty := strings.Repeat("\x01\"\\\xff\u2028é<", 1<<16) // about 1 MiB
	in := LogLine{Time: nasty, Method: nasty, URL: "https://a/" + nasty, Key: "GET a/" + nasty, Type: nasty, Dest: nasty,
		Source: Source(nasty), Rule: nasty, Endpoint: nasty, Status: 200, Entry: nasty, Record: nasty, MS: 1.5, Note: nasty, BodySize: 7}
	b := encodeLogLine(in)
	if b == nil || len(b) > MaxLogLine || b[len(b)-1] != '\n' || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("encoded %d bytes", len(b))
	}
	out, problem := ParseLogLine(b[:len(b)-1])
	if out == nil {
		t.Fatal(problem)
	}
	if !out.Truncated || out.URLSize != len(in.URL) || out.KeySize != len(in.Key) || out.BodySize != 7 {
		t.Errorf("sizes: %+v", out)
	}
	// Invalid UTF-8 is written as U+FFFD: compare with the string as JSON reads it back.
	valid := jsonRound
	for name, f := range map[string][2]string{"url": {out.URL, in.URL}, "key": {out.Key, in.Key}, "note": {out.Note, in.Note},
		"method": {out.Method, in.Method}, "rule": {out.Rule, in.Rule}, "entry": {out.Entry, in.Entry}} {
		if !strings.HasPrefix(valid(f[1]), f[0]) || len(f[0]) == 0 {
			t.Errorf("%s: %d bytes, not a prefix of the original", name, len(f[0]))
		}
	}
	// A line within the bounds is not touched.
	small := LogLine{Method: "POST", URL: "https://a/b", Key: "POST a/b", Source: "miss", BodySize: 12}
	if out, _ := ParseLogLine(bytes.TrimSpace(encodeLogLine(small))); out.Truncated || out.BodySize != 0 || out.URL != small.URL {
		t.Errorf("small line: %+v", out)
	}
}

// TestCutJSON: the cut prefix's encoding fits, and one more character would not.
func TestCutJSON(t *testing.T) {
	for _, s := range []string{strings.Repeat("a", 100), strings.Repeat("\"", 100), strings.Repeat("\x00", 100), strings.Repeat("é", 100), strings.Repeat("\u2028", 100), strings.Repeat("\xff", 100)} {
		for _, max := range []int{0, 1, 5, 6, 7, 60, 99, 100, 101, 599, 600} {
			c, cut := cutJSON(s, max)
			enc, _ := json.Marshal(c)
			if len(enc)-2 > max || cut != (c != s) || !strings.HasPrefix(s, c) || (len(c) > 0 && !utf8.ValidString(c) && utf8.ValidString(s)) {
				t.Errorf("cutJSON(%.8q..., %d) = %d bytes, encoded %d, cut %v", s, max, len(c), len(enc)-2, cut)
			}
			if cut {
				next := s[:len(c)+1]
				if r, n := utf8.DecodeRuneInString(s[len(c):]); r != utf8.RuneError || n > 1 {
					next = s[:len(c)+n]
				}
				if e, _ := json.Marshal(next); len(e)-2 <= max {
					t.Errorf("cutJSON(%.8q..., %d) cut too much: %d bytes", s, max, len(c))
				}
			}
		}
	}
}

// TestLogTailByteBound: the in-memory tail drops its oldest lines to stay within its byte
// bound as well as its line count, and serves the newest lines in order.
func TestLogTailByteBound(t *testing.T) {
	r := newLogRing(10000)
	if r.maxBytes != DefaultLogTailBytes {
		t.Fatalf("default byte bound %d", r.maxBytes)
	}
	r.maxBytes = 10 << 10
	line := func(i int) []byte {
		return encodeLogLine(LogLine{Method: "GET", URL: fmt.Sprintf("https://a/%d?%s", i, strings.Repeat("x", 1000)), Source: "miss"})
	}
	for i := range 100 {
		r.add(line(i))
		if r.bytes > r.maxBytes {
			t.Fatalf("after %d lines: %d bytes kept, over %d", i+1, r.bytes, r.maxBytes)
		}
	}
	all := r.tail(10000)
	if len(all) > r.maxBytes || len(all) != r.bytes {
		t.Errorf("tail: %d bytes, ring %d", len(all), r.bytes)
	}
	lines, err := ReadLog(bytes.NewReader(all), "tail")
	if err != nil || len(lines) == 0 || len(lines) != r.n {
		t.Fatalf("tail: %d lines, %v", len(lines), err)
	}
	if want := fmt.Sprintf("https://a/%d?", 99); !strings.HasPrefix(lines[len(lines)-1].URL, want) {
		t.Errorf("newest line %q", lines[len(lines)-1].URL[:20])
	}
	for i := 1; i < len(lines); i++ {
		var a, b int
		fmt.Sscanf(lines[i-1].URL, "https://a/%d?", &a)
		fmt.Sscanf(lines[i].URL, "https://a/%d?", &b)
		if b != a+1 {
			t.Errorf("tail out of order: %d then %d", a, b)
		}
	}
	// The line bound still holds, and lowering the byte bound drops more of the oldest.
	r2 := newLogRing(3)
	for i := range 5 {
		r2.add(line(i))
	}
	if r2.n != 3 {
		t.Errorf("line bound: %d kept", r2.n)
	}
	r2.maxBytes = 2500
	r2.add(line(5))
	r2.add(line(6))
	if r2.n != 2 || r2.bytes > 2500 {
		t.Errorf("after lowering the byte bound: %d lines, %d bytes", r2.n, r2.bytes)
	}
}

// TestLogTailByteBoundProxy: big requests through a real proxy leave at most the byte bound
// in its tail, the newest lines kept.
func TestLogTailByteBoundProxy(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	tp.s.tail.mu.Lock()
	tp.s.tail.maxBytes = 200 << 10
	tp.s.tail.mu.Unlock()
	for i := range 12 {
		tp.get(t, fmt.Sprintf("https://site.test/big/%d?%s", i, strings.Repeat("q", 100<<10)), nil)
	}
	tail := tp.get(t, "http://rr.control/log?tail=100", nil)
	if len(tail.body) > 200<<10 {
		t.Errorf("tail: %d bytes, over the bound", len(tail.body))
	}
	lines, err := ReadLog(bytes.NewReader(tail.body), "tail")
	if err != nil || len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1].URL, "https://site.test/big/11?") {
		t.Fatalf("tail: %d lines, %v", len(lines), err)
	}
	if n := len(tp.logLines(t)); n != 12 {
		t.Errorf("log file: %d lines, want all 12", n)
	}
}

// TestLogScannerLongLines: a line over MaxReadLogLine is reported with its number and read
// past; the lines around it are read. (That it is not held whole: readlimit's
// TestLineReaderMemory.)
func TestLogScannerLongLines(t *testing.T) {
	good := `{"method":"GET","url":"https://a/","source":"exact"}`
	long := `{"method":"POST","url":"https://a/basket/add/?` + strings.Repeat("x", 5<<20) + `","source":"miss"}`
	data := good + "\r\n\n" + long + "\n" + `{"method":"GET","url":"https://a/x","sou` + "\n" + good
	sc := NewLogScanner(strings.NewReader(data))
	type got struct {
		line int
		ok   bool
		prob string
	}
	var gs []got
	for sc.Scan() {
		gs = append(gs, got{sc.Line(), sc.Log() != nil, sc.Problem()})
	}
	if sc.Err() != nil {
		t.Fatal(sc.Err())
	}
	want := []got{{1, true, ""}, {3, false, fmt.Sprintf("longer than %d bytes", MaxReadLogLine)}, {4, false, "not JSON: unexpected end of JSON input"}, {5, true, ""}}
	if fmt.Sprint(gs) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", gs, want)
	}
	// A line of exactly the bound is read.
	exact := `{"method":"GET","source":"exact","url":"https://a/` + strings.Repeat("y", MaxReadLogLine-len(`{"method":"GET","source":"exact","url":"https://a/"}`)) + `"}`
	if lines, err := ReadLog(strings.NewReader(exact+"\n"+exact), "x"); err != nil || len(lines) != 2 {
		t.Errorf("line of %d bytes: %v", len(exact), err)
	}
	if _, err := ReadLog(strings.NewReader(exact+"\r\n"), "x"); err != nil {
		t.Errorf("line of the bound ending in CRLF: %v", err)
	}
	if _, err := ReadLog(strings.NewReader(exact+" \n"), "x"); err == nil || !strings.Contains(err.Error(), "x line 1: longer than") {
		t.Errorf("line over the bound: %v", err)
	}
}

// TestSummarizerBounds: distinct missed keys, types and sources beyond the bounds are
// counted but not kept one by one.
func TestSummarizerBounds(t *testing.T) {
	s := NewSummarizer(nil)
	for i := range MaxMissedKeys + 500 {
		s.Add(&LogLine{Method: "GET", URL: fmt.Sprintf("https://a/%d", i), Key: fmt.Sprintf("GET a/%d", i), Type: "image", Source: SourceMiss})
	}
	s.Add(&LogLine{Method: "GET", URL: "https://a/0", Key: "GET a/0", Type: "image", Source: SourceMiss})
	long := "GET a/" + strings.Repeat("z", 5000)
	s.Add(&LogLine{Method: "GET", URL: "https://a/long", Key: long + "1", Type: "image", Source: SourceExact})
	for i := range 100 {
		s.Add(&LogLine{Method: "GET", URL: "https://a/", Type: fmt.Sprintf("t%d", i), Source: Source(fmt.Sprintf("s%d", i))})
	}
	s.Unreadable(7, "not JSON")
	s.Unreadable(9, "not JSON")
	st := s.Stats()
	if len(st.TopMissed) != MaxMissedKeys || st.MissedOther != 500 || st.TopMissed[0].Key != "GET a/0" || st.TopMissed[0].Count != 2 {
		t.Errorf("missed: %d kept, %d other, first %+v", len(st.TopMissed), st.MissedOther, st.TopMissed[0])
	}
	if len(st.ByType) > MaxStatsLabels+1 || len(st.BySource) > MaxStatsLabels+1 || st.ByType[otherLabel] == 0 || st.BySource[otherLabel] == 0 {
		t.Errorf("labels: %d types, %d sources", len(st.ByType), len(st.BySource))
	}
	if st.Total != MaxMissedKeys+500+1+1+100 || st.Unreadable != 2 || st.FirstUnreadable != "line 7: not JSON" {
		t.Errorf("total %d unreadable %d %q", st.Total, st.Unreadable, st.FirstUnreadable)
	}
	var sb strings.Builder
	st.Print(&sb, 3)
	if out := sb.String(); !strings.Contains(out, "unreadable lines: 2, skipped (first: line 7: not JSON)") || !strings.Contains(out, "500 misses of further keys not ranked") {
		t.Errorf("print:\n%.600s", out)
	}
	// Long missed keys are kept cut, and told apart.
	s = NewSummarizer(nil)
	for _, k := range []string{long + "1", long + "2", long + "1"} {
		s.Add(&LogLine{Method: "GET", URL: "https://a/", Key: k, Type: "image", Source: SourceMiss})
	}
	st = s.Stats()
	if len(st.TopMissed) != 2 || st.TopMissed[0].Count != 2 || len(st.TopMissed[0].Key) > maxStatsText || !strings.HasSuffix(st.TopMissed[0].Key, "…") {
		t.Errorf("long keys: %d kept, first count %d, %d bytes", len(st.TopMissed), st.TopMissed[0].Count, len(st.TopMissed[0].Key))
	}
}

// TestSummarizeLogSpares: the streaming summary lists the same spares as Spares.
func TestSummarizeLogSpares(t *testing.T) {
	ix := testIndex(t)
	data := `{"method":"GET","url":"https://site.test/","source":"exact","type":"document","entry":"e000001"}
not json
{"method":"GET","url":"https://site.test/x","source":"exact","type":"document","entry":"e999999"}
`
	st, err := SummarizeLog(strings.NewReader(data), "log", ix)
	if err != nil {
		t.Fatal(err)
	}
	lines := []LogLine{{Entry: "e000001"}, {Entry: "e999999"}}
	want := Spares(ix, lines)
	if len(st.Spares) != len(want) || st.Spares[0].ID != want[0].ID || st.Unreadable != 1 || st.FirstUnreadable != "line 2: not JSON: invalid character 'o' in literal null (expecting 'u')" {
		t.Errorf("spares %d (want %d), unreadable %d %q", len(st.Spares), len(want), st.Unreadable, st.FirstUnreadable)
	}
}

// FuzzLogScanner: any input is read line by line without a panic; every non-blank line is
// either a replay log line (with method, url and source) or has a one-line problem; line
// numbers rise; ReadLog agrees with the scanner.
func FuzzLogScanner(f *testing.F) {
	f.Add([]byte(`{"time":"2026-01-01T00:00:00.000Z","method":"GET","url":"https://a.test/","key":"GET a.test/","type":"document","source":"exact","status":200,"truncated":true,"url_size":99}` + "\n"))
	f.Add([]byte("{}\r\n\n{\"method\":\"GET\"}\n[1]\nnull\n\"x\"\n{\"status\":\"x\"}"))
	f.Add([]byte("\xff\xfe\n\r\n  \t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := NewLogScanner(bytes.NewReader(data))
		last, good, bad := 0, 0, 0
		for sc.Scan() {
			if sc.Line() <= last {
				t.Fatalf("line %d after %d", sc.Line(), last)
			}
			last = sc.Line()
			if l := sc.Log(); l != nil {
				if l.Method == "" || l.URL == "" || l.Source == "" || sc.Problem() != "" {
					t.Fatalf("incomplete line accepted: %+v", l)
				}
				good++
			} else {
				if sc.Problem() == "" || strings.Contains(sc.Problem(), "\n") {
					t.Fatalf("line %d: problem %q", sc.Line(), sc.Problem())
				}
				bad++
			}
		}
		if sc.Err() != nil {
			t.Fatal(sc.Err())
		}
		if last > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("line %d of %d", last, bytes.Count(data, []byte("\n"))+1)
		}
		lines, err := ReadLog(bytes.NewReader(data), "f")
		if (err == nil) != (bad == 0) || (err == nil && len(lines) != good) {
			t.Fatalf("ReadLog: %d lines, %v; scanner %d good %d bad", len(lines), err, good, bad)
		}
		st, err := SummarizeLog(bytes.NewReader(data), "f", nil)
		if err != nil || st.Total != good || st.Unreadable != bad {
			t.Fatalf("SummarizeLog: total %d unreadable %d, %v", st.Total, st.Unreadable, err)
		}
	})
}

// FuzzEncodeLogLine: any field values encode to one line within MaxLogLine that reads back,
// each field a prefix of the value logged (as JSON keeps it: invalid UTF-8 replaced).
func FuzzEncodeLogLine(f *testing.F) {
	f.Add("https://a/", "GET a/", "note", 1)
	f.Add("https://a/\x00\"\\", "\xff\u2028", "é", 2000)
	f.Fuzz(func(t *testing.T, u, key, note string, repeat int) {
		repeat = 1 + (repeat&0x7fffffff)%(50<<10)
		in := LogLine{Method: "GET", URL: strings.Repeat(u, repeat), Key: strings.Repeat(key, repeat), Source: "miss", Note: strings.Repeat(note, repeat), BodySize: 3}
		if in.URL == "" {
			in.URL = "u"
		}
		b := encodeLogLine(in)
		if b == nil || len(b) > MaxLogLine || bytes.IndexByte(b, '\n') != len(b)-1 {
			t.Fatalf("encoded %d bytes", len(b))
		}
		out, problem := ParseLogLine(b[:len(b)-1])
		if out == nil {
			t.Fatal(problem)
		}
		valid := jsonRound
		for _, p := range [][2]string{{out.URL, in.URL}, {out.Key, in.Key}, {out.Note, in.Note}} {
			if !strings.HasPrefix(valid(p[1]), p[0]) {
				t.Fatalf("%d bytes kept are not a prefix", len(p[0]))
			}
		}
		if out.Truncated != (out.URL != valid(in.URL) || out.Key != valid(in.Key) || out.Note != valid(in.Note)) {
			t.Fatalf("truncated %v", out.Truncated)
		}
	})
}

// jsonRound is s as JSON writes and reads it back (invalid UTF-8 bytes become U+FFFD).
func jsonRound(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// TestLogRingWrap: the tail's one circular buffer, grown while lines come and wrapping
// around its end once full, gives the same lines as a plain list of the last lines within
// the same bounds, for any mix of line sizes and any tail length.
func TestLogRingWrap(t *testing.T) {
	r := newLogRing(50)
	r.maxBytes = 3000
	var model [][]byte
	for i := range 2000 {
		line := []byte(fmt.Sprintf("%d %s\n", i, strings.Repeat("x", (i*7919)%400)))
		r.add(line)
		model = checkRing(t, r, append(model, line), i, 7)
		if len(r.buf) > 3000 {
			t.Fatalf("after line %d: buffer of %d bytes, over the bound", i, len(r.buf))
		}
	}
	// a line over the byte bound is not kept, and the others stay
	before := r.tail(100)
	r.add(bytes.Repeat([]byte("y"), 3001))
	if got := r.tail(100); !bytes.Equal(got, before) {
		t.Error("a line over the byte bound changed the tail")
	}
}

// TestLogRingMemoLines: lines written from a lineMemo's middle, kept by the ring as their
// middle, time and ms, come back from tail byte for byte as appendLogLine wrote them, in
// order with the lines kept whole, within the same bounds as a plain list of the last
// lines, for times in any second and millisecond (before 1970 and after 9999 too), and
// whatever becomes of the memo after.
func TestLogRingMemoLines(t *testing.T) {
	r := newLogRing(40)
	r.maxBytes = 6000
	memos := make([]*lineMemo, 5)
	for i := range memos {
		memos[i] = &lineMemo{}
	}
	times := []time.Time{
		time.Date(2026, 12, 7, 15, 0, 0, 999_999_999, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 1_500_000, time.UTC),
		time.Date(10001, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
		time.Date(2026, 12, 7, 10, 0, 0, 0, time.FixedZone("x", -5*3600)),
	}
	var model [][]byte
	memoLines := 0
	for i := range 3000 {
		at := times[i%len(times)].Add(time.Duration(i) * 1_234_567 * time.Microsecond)
		m := memos[i%len(memos)]
		line := LogLine{Method: "GET", URL: fmt.Sprintf("https://a.test/%d", i%len(memos)), Source: SourceExact,
			Status: 200, MS: float64(i%997) / 1000}
		if i%11 == 0 {
			line.Note = strings.Repeat("n", i%300) // never from the memo: kept whole
		}
		if i%13 == 0 {
			line.Status = 200 + i%3 // another middle: encoded in full and kept by the memo
		}
		b, mid, ok := appendLogLineMid(nil, line, &at, m)
		if !ok {
			t.Fatalf("line %d not encoded", i)
		}
		want, _ := appendLogLine(nil, line, &at, nil)
		if !bytes.Equal(b, want) {
			t.Fatalf("line %d: %q, want %q", i, b, want)
		}
		r.mu.Lock()
		if mid != nil {
			memoLines++
			r.addMemoLocked(mid, at, line.MS, len(b))
		} else {
			r.addLocked(b)
		}
		r.mu.Unlock()
		model = checkRing(t, r, append(model, b), i, 9)
		if r.whole > len(r.buf) || len(r.buf) > 6000 {
			t.Fatalf("after line %d: %d whole bytes in a buffer of %d (bound 6000)", i, r.whole, len(r.buf))
		}
	}
	if memoLines < 2000 {
		t.Errorf("%d of 3000 lines from a memo, want most", memoLines)
	}
	// a dropped line's middle is no longer held by the ring
	for i := r.n; i < len(r.lines); i++ {
		if l := r.lines[(r.start+i)%len(r.lines)]; l.mid != nil {
			t.Fatalf("slot %d, not a kept line, holds a middle", i)
		}
	}
}

// checkRing checks r, after its line i, against model (every line added, in order): it
// returns the lines of model a ring of len(r.lines) lines and r.maxBytes bytes keeps (the
// newest that fit) and fails t unless r holds as many lines and bytes, and its tail of 0,
// 1, mid, all and more lines is theirs.
func checkRing(t *testing.T, r *logRing, model [][]byte, i, mid int) [][]byte {
	t.Helper()
	size := 0
	for j := len(model) - 1; j >= 0; j-- {
		if len(model)-j > len(r.lines) || size+len(model[j]) > r.maxBytes {
			model = model[j+1:]
			break
		}
		size += len(model[j])
	}
	if r.n != len(model) || r.bytes != size {
		t.Fatalf("after line %d: ring %d lines %d bytes, want %d lines %d bytes", i, r.n, r.bytes, len(model), size)
	}
	for _, n := range []int{0, 1, mid, len(r.lines), 2 * len(r.lines)} {
		want := bytes.Join(model[max(len(model)-n, 0):], nil)
		if got := r.tail(n); !bytes.Equal(got, want) {
			t.Fatalf("after line %d: tail(%d) = %q, want %q", i, n, got, want)
		}
	}
	return model
}
