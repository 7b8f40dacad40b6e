package replay

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// jsonLogLine is what encoding/json writes for l (the reference marshalLogLine matches).
func jsonLogLine(t testing.TB, l LogLine) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestMarshalLogLine checks the hand-written log encoder against encoding/json on lines
// with every field set, none set, and strings that need escaping.
func TestMarshalLogLine(t *testing.T) {
	for _, l := range []LogLine{
		{},
		{Time: "2026-12-01T10:00:00.000Z", Method: "GET", URL: "https://a.test/p?q=1&r=<x>", Key: "GET a.test/p?q=1", Type: "document",
			Dest: "document", Source: "exact", Rule: "sites/a.yaml:3", Endpoint: "search", Status: 200, Entry: "e000001",
			Record: "<urn:uuid:1>", MS: 0.048, Note: "a \"note\"\\ with\ttab\nand\x01ctl \u2028 \u2029 \xff bad", Truncated: true,
			URLSize: 40000, KeySize: 20000, BodySize: 1 << 40},
		{MS: 1e-7, Status: -1},
		{MS: 123456.789},
		{MS: 1e22},
		{URL: "héllo wörld ☃ \U0001F600", Note: "\x7f\x00"},
	} {
		want := jsonLogLine(t, l)
		if got := marshalLogLine(l); !bytes.Equal(got, want) {
			t.Errorf("marshalLogLine:\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzMarshalLogLine compares the hand-written encoder with encoding/json on any strings
// and numbers.
func FuzzMarshalLogLine(f *testing.F) {
	f.Add("https://a.test/\x00\"\\", "note \u2028\xff", 200, 0.5, int64(3))
	f.Fuzz(func(t *testing.T, url, note string, status int, ms float64, body int64) {
		l := LogLine{URL: url, Key: note + url, Note: note, Status: status, MS: ms, BodySize: body, Method: note}
		if ms != ms || ms > 1e300 || ms < -1e300 {
			return // NaN and infinities: encoding/json refuses them; durations never are
		}
		want := jsonLogLine(t, l)
		if got := marshalLogLine(l); !bytes.Equal(got, want) {
			t.Errorf("marshalLogLine:\n got %q\nwant %q", got, want)
		}
	})
}

// TestLogTime checks the hand-written log time against time.Format(LogTimeFormat).
func TestLogTime(t *testing.T) {
	loc := time.FixedZone("x", -8*3600)
	for _, tm := range []time.Time{
		time.Date(2026, 12, 1, 16, 30, 21, 616_999_999, time.UTC),
		// the same second again (appendLogTime keeps its text), other milliseconds, in
		// another zone
		time.Date(2026, 12, 1, 8, 30, 21, 5_000_000, loc),
		time.Date(2026, 12, 1, 16, 30, 22, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2008, 4, 30, 20, 48, 25, 5_000_000, loc),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
		time.Now(),
	} {
		if got, want := logTime(tm), tm.UTC().Format(LogTimeFormat); got != want {
			t.Errorf("logTime(%v) = %q, want %q", tm, got, want)
		}
		// the proxy's lines are encoded with their time given apart (appendLogLine), into
		// a buffer that already holds bytes: the same line as with Time set
		l := LogLine{Method: "GET", URL: "https://a.test/\u2028\"", Source: SourceExact, Status: 200, MS: 0.25}
		want := encodeLogLine(LogLine{Time: logTime(tm), Method: l.Method, URL: l.URL, Source: l.Source, Status: l.Status, MS: l.MS})
		got, ok := appendLogLine([]byte("prefix"), l, &tm, nil)
		if !ok || string(got) != "prefix"+string(want) {
			t.Errorf("appendLogLine at %v = %q, %v; want prefix%q", tm, got, ok, want)
		}
	}
}

// TestLogLineMemo checks the log lines a lineMemo gives against the same lines encoded
// without it: lines that differ from the kept one in any middle field (method through
// record), lines with a note, a body size or a field cut (never kept, and encoded in full
// when the memo holds another), in any order, repeated, and from goroutines sharing one
// memo (run with -race).
func TestLogLineMemo(t *testing.T) {
	at := time.Date(2026, 12, 6, 19, 0, 0, 123_000_000, time.UTC)
	base := LogLine{Method: "GET", URL: "https://a.test/p?q=1", Key: "GET a.test/p q=1", Type: "document", Dest: "document",
		Source: SourceExact, Rule: "sites/a.yaml:3", Endpoint: "search", Status: 200, Entry: "e1", Record: "<urn:uuid:1>", MS: 0.25}
	lines := []LogLine{base}
	for i, edit := range []func(*LogLine){
		func(l *LogLine) { l.Method = "HEAD" },
		func(l *LogLine) { l.URL += "&r=\"2\"" },
		func(l *LogLine) { l.Key += " r=2" },
		func(l *LogLine) { l.Type = "image" },
		func(l *LogLine) { l.Dest = "" },
		func(l *LogLine) { l.Source = SourceFuzzy },
		func(l *LogLine) { l.Rule = "" },
		func(l *LogLine) { l.Endpoint = "other" },
		func(l *LogLine) { l.Status = 304 },
		func(l *LogLine) { l.Entry = "e2" },
		func(l *LogLine) { l.Record = "" },
		func(l *LogLine) { l.MS = 12.5 },
		func(l *LogLine) { l.Note = "a note" },
		func(l *LogLine) { l.BodySize = 7 },
		func(l *LogLine) { l.Rule = strings.Repeat("r", 5000) },
		func(l *LogLine) { l.URL = strings.Repeat("u", 40<<10) },
		func(l *LogLine) { l.Truncated, l.URLSize = true, 99 },
	} {
		l := base
		edit(&l)
		if reflect.DeepEqual(l, base) {
			t.Fatalf("edit %d changes nothing", i)
		}
		lines = append(lines, l)
	}
	want := make([][]byte, len(lines))
	for i, l := range lines {
		b, ok := appendLogLine(nil, l, &at, nil)
		if !ok {
			t.Fatalf("line %d not encoded", i)
		}
		want[i] = b
	}
	check := func(memo *lineMemo, i int) {
		t.Helper()
		got, ok := appendLogLine([]byte("x"), lines[i], &at, memo)
		if !ok || string(got) != "x"+string(want[i]) {
			t.Errorf("line %d with the memo:\n got %q\nwant %q", i, got, "x"+string(want[i]))
		}
	}
	memo := new(lineMemo)
	for round := 0; round < 3; round++ {
		for i := range lines {
			check(memo, i)
			check(memo, i) // again: from the memo when the line was kept
			check(memo, 0)
		}
	}
	for _, i := range []int{13, 15, 16, 17} { // a note, a cut rule, a cut URL, cut before
		m := new(lineMemo)
		check(m, i)
		if m.last.Load() != nil {
			t.Errorf("line %d was kept", i)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				check(memo, (g*7+k)%len(lines))
			}
		}()
	}
	wg.Wait()
}

// TestAppendJSONFloat: the log's ms (whole microseconds in milliseconds, written from their
// integer) and any other float64 are written as encoding/json writes them.
func TestAppendJSONFloat(t *testing.T) {
	check := func(f float64) {
		t.Helper()
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONFloat(nil, f); string(got) != string(want) {
			t.Fatalf("appendJSONFloat(%v) = %s, encoding/json %s", f, got, want)
		}
	}
	for us := range int64(200_000) {
		check(math.Round(float64(us)) / 1000)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(math.Round(float64(rng.Int64N(1e12))) / 1000) // up to 10^9 ms
		check(float64(rng.Int64N(1e15)) / 1000)             // past the integer path's bound
		check(rng.Float64() * math.Pow(10, float64(rng.IntN(40)-20)))
	}
	for _, f := range []float64{0, 1e-7, 0.001, 0.0005, 999999999.999, 1e9, 1e9 + 0.5, 123456.789, 1e21, 1e22, math.Nextafter(0.001, 1), math.Nextafter(2.5, 0)} {
		check(f)
	}
}
