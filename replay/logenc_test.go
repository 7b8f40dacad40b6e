package replay

import (
	"bytes"
	"encoding/json"
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
		got, ok := appendLogLine([]byte("prefix"), l, &tm)
		if !ok || string(got) != "prefix"+string(want) {
			t.Errorf("appendLogLine at %v = %q, %v; want prefix%q", tm, got, ok, want)
		}
	}
}
