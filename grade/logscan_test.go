package grade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/replay"
)

// basketGrading forbids basket requests and asks for a visit; no judge is needed.
const basketGrading = `trace:
  - id: read_site
    must: { method: GET, url: "*://books.toscrape.com/*" }
  - id: no_basket
    must_not: { method: POST, url: "*/basket/add/*" }
`

func jsonLine(t testing.TB, l replay.LogLine) string {
	t.Helper()
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gradeLogString(t *testing.T, grading, log string) *Result {
	t.Helper()
	in := Input{Task: "t", Grading: mustGrading(t, grading), Answer: AnswerFromBytes([]byte("x"))}
	r, err := GradeLog(context.Background(), in, strings.NewReader(log), "replay.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Grading the same log read whole gives the same result.
	lr, err := ReadLog(strings.NewReader(log), "replay.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in.Log = lr
	r2 := Grade(context.Background(), in, Options{})
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(r2)
	if !bytes.Equal(a, b) {
		t.Errorf("GradeLog and Grade(ReadLog) differ:\n%s\n%s", a, b)
	}
	return r
}

func itemByID(r *Result, id string) Item {
	for _, it := range r.Items {
		if it.ID == id {
			return it
		}
	}
	return Item{}
}

// TestGradeLogUnreadableFailsClosed: a line that cannot be read (corrupt JSON, cut short,
// over the reader's bound) may be the request a must_not forbids: the entry is an error
// naming the line and the run is an error, never a pass.
func TestGradeLogUnreadableFailsClosed(t *testing.T) {
	home := jsonLine(t, homeHit)
	hidden := `{"time":"2026-01-01T00:00:05.000Z","method":"POST","url":"https://books.toscrape.com/basket/add/?ref=` + strings.Repeat("a", MaxLogLine) + `","source":"miss","status":404}`
	for name, c := range map[string]struct {
		log  string
		line int
		why  string
	}{
		"over the bound": {home + "\n" + hidden + "\n", 2, "longer than 1048576 bytes"},
		"corrupt JSON":   {home + "\n\n" + `{"method":"POST","url":"https://books.toscrape.com/basket/add/1/","sou` + "\n" + home + "\n", 3, "not JSON"},
		"not an object":  {home + "\n" + `["POST","https://books.toscrape.com/basket/add/1/"]` + "\n", 2, "not a replay log line"},
		"cut at the end": {home + "\n" + `{"method":"POST","url":"https://books.toscrape.com/bas`, 2, "not JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			r := gradeLogString(t, basketGrading, c.log)
			if r.Status != StatusError || r.Score != nil || r.Passed {
				t.Fatalf("status %s score %v passed %v, want error", r.Status, r.Score, r.Passed)
			}
			it := itemByID(r, "no_basket")
			want := fmt.Sprintf("line %d of the replay log could not be read (%s", c.line, c.why)
			if it.Result != ResultError || !strings.Contains(it.Reason, want) {
				t.Errorf("no_basket: %s %q, want an error containing %q", it.Result, it.Reason, want)
			}
			notes := strings.Join(r.Notes, "\n")
			if !strings.Contains(notes, "trace no_basket could not be decided: "+want) {
				t.Errorf("notes:\n%s", notes)
			}
			// A must entry cannot be satisfied by an unreadable line; it is decided as usual.
			if it := itemByID(r, "read_site"); it.Result != ResultPass {
				t.Errorf("read_site: %s %s", it.Result, it.Reason)
			}
		})
	}
	// Without a must_not the unreadable line changes nothing but a note.
	r := gradeLogString(t, "trace:\n  - id: read_site\n    must: { url: \"*://books.toscrape.com/*\" }\n", home+"\nnot json\n")
	if r.Status != StatusScored || !r.Passed || !strings.Contains(strings.Join(r.Notes, " "), "1 of 2 lines of the replay log could not be read") {
		t.Errorf("must only: %s %v %v", r.Status, r.Passed, r.Notes)
	}
	// A must_not already failed by a readable line stays a plain failure.
	r = gradeLogString(t, basketGrading, home+"\n"+jsonLine(t, basket)+"\nnot json\n")
	if r.Status != StatusScored || r.Passed || itemByID(r, "no_basket").Result != ResultFail {
		t.Errorf("matched and unreadable: %s %v %+v", r.Status, r.Passed, itemByID(r, "no_basket"))
	}
}

// TestGradeLogTruncated: on a line replay cut, a must_not pattern that the kept URL
// settles fails as a match; one the cut part could satisfy fails as a possible match; a
// must needs a sure match; a pattern the kept part rules out is unaffected.
func TestGradeLogTruncated(t *testing.T) {
	cut := replay.LogLine{Time: "2026-01-01T00:00:05.000Z", Method: "POST", URL: "https://books.toscrape.com/basket/add/?ref=aaaa",
		Key: "POST books.toscrape.com/basket/add/?ref=aaaa", Type: "api", Source: "miss", Status: 404, Truncated: true, URLSize: 1 << 20, KeySize: 5 << 20, BodySize: 4 << 20}
	log := jsonLine(t, homeHit) + "\n" + jsonLine(t, cut) + "\n"
	r := gradeLogString(t, basketGrading, log)
	if it := itemByID(r, "no_basket"); it.Result != ResultFail || it.Reason != "request 2 matched, which must not happen" || it.Request == nil || it.Request.Method != "POST" {
		t.Errorf("no_basket: %+v", it)
	}
	if r.Status != StatusScored || r.Passed || r.Log.Truncated != 1 {
		t.Errorf("status %s passed %v truncated %d", r.Status, r.Passed, r.Log.Truncated)
	}
	g := `trace:
  - id: no_checkout
    must_not: { method: POST, url: "*/checkout/done" }
  - id: saw_add
    must: { method: POST, url: "*/basket/add/?ref=aaaa" }
  - id: no_other_host
    must_not: { url: "https://other.test/*" }
`
	r = gradeLogString(t, g, log)
	if it := itemByID(r, "no_checkout"); it.Result != ResultFail || !strings.Contains(it.Reason, "request 2 (line 2 of the log) may match") || !strings.Contains(it.Reason, "its URL was cut to 47 of 1048576 bytes") {
		t.Errorf("no_checkout: %s %q", it.Result, it.Reason)
	}
	if it := itemByID(r, "saw_add"); it.Result != ResultFail {
		t.Errorf("saw_add: a cut URL satisfied a must that its cut part decides: %s %q", it.Result, it.Reason)
	}
	if it := itemByID(r, "no_other_host"); it.Result != ResultPass {
		t.Errorf("no_other_host: %s %q", it.Result, it.Reason)
	}
	// A method that may have been cut.
	m := cut
	m.Method, m.URL, m.URLSize = strings.Repeat("P", replay.MaxLogMethod), "https://books.toscrape.com/basket/add/1/", 0
	r = gradeLogString(t, "trace:\n  - id: no_long\n    must_not: { method: "+strings.Repeat("P", 70)+", url: '*' }\n", jsonLine(t, m)+"\n")
	if it := itemByID(r, "no_long"); it.Result != ResultFail || !strings.Contains(it.Reason, "its method was cut to 64 bytes") {
		t.Errorf("no_long: %s %q", it.Result, it.Reason)
	}
}

func TestGlobMayExtend(t *testing.T) {
	// Against brute force: some suffix over the patterns' bytes and "z", up to 5 long.
	alphabet := []string{"", "a", "b", "/", "z"}
	var suffixes []string
	var grow func(s string, n int)
	grow = func(s string, n int) {
		suffixes = append(suffixes, s)
		if n == 0 {
			return
		}
		for _, c := range alphabet[1:] {
			grow(s+c, n-1)
		}
	}
	grow("", 5)
	for _, p := range []string{"a", "ab", "a*", "*a", "a*b", "*/a*", "ab*ba", "**", "", "b/a*"} {
		for _, prefix := range []string{"", "a", "ab", "b", "ba", "a/", "a/b", "aab"} {
			want := false
			for _, x := range suffixes {
				if GlobMatch(p, prefix+x) {
					want = true
					break
				}
			}
			if got := globMayExtend(p, prefix); got != want {
				t.Errorf("globMayExtend(%q, %q) = %v, brute force %v", p, prefix, got, want)
			}
		}
	}
}

// TestGradeLogBounds: a log with more pages than a result lists keeps the first ones and
// counts the rest; URLs are cut for the result.
func TestGradeLogBounds(t *testing.T) {
	var b strings.Builder
	n := MaxPagesOpened + 50
	for i := range n {
		l := homeHit
		l.URL = fmt.Sprintf("https://books.toscrape.com/p/%d", i)
		l.Key = "GET " + l.URL[8:]
		l.Status = 404
		if i == 0 {
			l.URL += "?" + strings.Repeat("q", 2*MaxResultURL)
		}
		b.WriteString(jsonLine(t, l) + "\n")
	}
	r, err := GradeLog(context.Background(), Input{Task: "t"}, strings.NewReader(b.String()), "l", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Pages
	if len(ps.Opened) != MaxPagesOpened || ps.OpenedOmitted != 50 || len(ps.NotFound) != MaxPagesNotFound || ps.NotFoundOmitted != n-MaxPagesNotFound {
		t.Errorf("opened %d (+%d), not found %d (+%d)", len(ps.Opened), ps.OpenedOmitted, len(ps.NotFound), ps.NotFoundOmitted)
	}
	if u := ps.Opened[0].URL; len(u) > MaxResultURL || !strings.HasSuffix(u, "…") {
		t.Errorf("long URL kept at %d bytes", len(u))
	}
	if r.Requests["exact"] != n || !strings.Contains(strings.Join(r.Notes, " "), "50 more pages opened are not listed") {
		t.Errorf("requests %v notes %v", r.Requests, r.Notes)
	}
}

// TestGradeLogExamples: streaming gives the same result as reading the committed example
// logs whole.
func TestGradeLogExamples(t *testing.T) {
	logs, _ := filepath.Glob("../docs/examples/*/*/replay.jsonl")
	if len(logs) == 0 {
		t.Fatal("no example logs in docs/examples (they are committed)")
	}
	for _, p := range logs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r := gradeLogString(t, booksGrading, string(data))
		if r.Log.Bad != 0 || len(r.Pages.Opened) == 0 {
			t.Errorf("%s: bad %d, pages %d", p, r.Log.Bad, len(r.Pages.Opened))
		}
	}
}

// FuzzGradeLog: any log is graded without a panic or an error, and a log with a line that
// could not be read never passes a grading with a must_not entry.
func FuzzGradeLog(f *testing.F) {
	f.Add(jsonLine(f, homeHit) + "\n" + jsonLine(f, basket) + "\n")
	f.Add(jsonLine(f, homeHit) + "\n{\"method\":\"POST\",\"url\":\"https://books.toscrape.com/basket/add/\n")
	f.Add(`{"method":"POST","url":"https://books.toscrape.com/basket/add/?x","source":"miss","truncated":true,"url_size":99}` + "\n" + jsonLine(f, homeHit))
	g := mustGradingF(basketGrading)
	f.Fuzz(func(t *testing.T, data string) {
		in := Input{Task: "t", Grading: g, Answer: AnswerFromBytes([]byte("x"))}
		r, err := GradeLog(context.Background(), in, strings.NewReader(data), "f", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Log.Bad > 0 && r.Passed {
			t.Fatalf("passed with %d unreadable lines: %v", r.Log.Bad, r.Notes)
		}
		if r.Log.Bad > 0 && r.Status == StatusScored && itemByID(r, "no_basket").Result == ResultPass {
			t.Fatalf("must_not passed with unreadable lines")
		}
		if _, err := RenderReport(r); err != nil {
			t.Fatal(err)
		}
	})
}
