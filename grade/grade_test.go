package grade

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pab-dev/pab/replay"
)

// scriptJudge answers prompts from a function and counts calls.
type scriptJudge struct {
	mu      sync.Mutex
	calls   int
	prompts []string
	answer  func(prompt string, call int) (string, error)
}

func (j *scriptJudge) Name() string { return "test/script" }

func (j *scriptJudge) Ask(ctx context.Context, prompt string) (Reply, error) {
	j.mu.Lock()
	j.calls++
	n := j.calls
	j.prompts = append(j.prompts, prompt)
	j.mu.Unlock()
	text, err := j.answer(prompt, n)
	return Reply{Text: text, Model: "script-1"}, err
}

// booksGrading is the demo task's grading in small.
const booksGrading = `extract:
  price: { type: money, description: the price of the book }
  title: { type: text, description: the book's title }
require:
  - field: price
    equals: 54.23
  - field: title
    contains: Sapiens
checks:
  - id: in_pounds
    question: Does the answer give the price in pounds?
    weight: 1
  - id: polite
    question: Is the answer polite?
    weight: 3
trace:
  - id: read_site
    must: { method: GET, url: "*://books.toscrape.com/*", hit: true }
  - id: no_basket
    must_not: { method: POST, url: "*basket*" }
`

func mustGrading(t *testing.T, src string) *Grading {
	t.Helper()
	g, err := ParseGrading("grading.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func logOf(lines ...replay.LogLine) *LogRead {
	return &LogRead{File: "replay.jsonl", Lines: len(lines), Requests: lines}
}

var (
	homeHit  = replay.LogLine{Time: "2026-01-01T00:00:00.000Z", Method: "GET", URL: "https://books.toscrape.com/", Key: "GET books.toscrape.com/", Type: "document", Dest: "document", Source: "exact", Status: 200, Entry: "e000001"}
	imageHit = replay.LogLine{Time: "2026-01-01T00:00:01.000Z", Method: "GET", URL: "https://books.toscrape.com/media/a.jpg", Key: "GET books.toscrape.com/media/a.jpg", Type: "image", Dest: "image", Source: "exact", Status: 200}
	frame    = replay.LogLine{Time: "2026-01-01T00:00:01.500Z", Method: "GET", URL: "https://ads.example/frame", Key: "GET ads.example/frame", Type: "document", Dest: "iframe", Source: "miss", Status: 404}
	miss404  = replay.LogLine{Time: "2026-01-01T00:00:02.000Z", Method: "GET", URL: "https://books.toscrape.com/catalogue/x.html?utm_source=a", Key: "GET books.toscrape.com/catalogue/x.html", Type: "document", Dest: "document", Source: "miss", Status: 404}
	again404 = replay.LogLine{Time: "2026-01-01T00:00:03.000Z", Method: "GET", URL: "https://books.toscrape.com/catalogue/x.html", Key: "GET books.toscrape.com/catalogue/x.html", Type: "document", Dest: "document", Source: "miss", Status: 404}
	site404  = replay.LogLine{Time: "2026-01-01T00:00:04.000Z", Method: "GET", URL: "https://books.toscrape.com/gone", Key: "GET books.toscrape.com/gone", Type: "document", Dest: "document", Source: "exact", Status: 404, Entry: "e000009"}
	basket   = replay.LogLine{Time: "2026-01-01T00:00:05.000Z", Method: "POST", URL: "https://books.toscrape.com/basket/add/1/", Key: "POST books.toscrape.com/basket/add/1/", Type: "api", Dest: "empty", Source: "miss", Status: 404}
)

// goodJudge answers like a careful judge reading the right answer.
func goodJudge(prompt string, _ int) (string, error) {
	switch {
	case strings.Contains(prompt, "Extract these fields"):
		return "```json\n{\"price\": \"£54.23\", \"title\": \"Sapiens: A Brief History of Humankind\"}\n```", nil
	case strings.Contains(prompt, "in pounds"):
		return `{"answer": "yes", "reason": "It says £54.23."}`, nil
	default:
		return `{"answer": "no", "reason": "It is curt."}`, nil
	}
}

func TestGradeScoresAndExplains(t *testing.T) {
	j := &scriptJudge{answer: goodJudge}
	in := Input{
		Task: "books", Prompt: "What does Sapiens cost?", Grading: mustGrading(t, booksGrading),
		Answer: AnswerFromBytes([]byte("Sapiens costs £54.23.")),
		Log:    logOf(homeHit, imageHit, frame, miss404, again404, site404),
		Titles: map[string]string{"e000001": "All products"},
	}
	r := Grade(context.Background(), in, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusScored || r.Score == nil {
		t.Fatalf("status %s notes %v", r.Status, r.Notes)
	}
	// Required items pass; weighted: in_pounds (1) passes, polite (3) fails: 1/4.
	if *r.Score != 0.25 || r.Passed {
		t.Errorf("score %v passed %v, want 0.25 false", *r.Score, r.Passed)
	}
	byID := map[string]Item{}
	for _, it := range r.Items {
		byID[it.ID] = it
	}
	if it := byID["price"]; it.Result != ResultPass || it.Actual != "54.23 GBP" || it.Expected != "price = 54.23 ± 0.01" {
		t.Errorf("price item %+v", it)
	}
	if it := byID["in_pounds"]; it.Result != ResultPass || it.JudgeReason != "It says £54.23." || it.Actual != "yes" {
		t.Errorf("in_pounds %+v", it)
	}
	if it := byID["read_site"]; it.Result != ResultPass || it.Request == nil || it.Request.Line != 1 || it.Request.URL != homeHit.URL {
		t.Errorf("read_site %+v", it)
	}
	if it := byID["no_basket"]; it.Result != ResultPass {
		t.Errorf("no_basket %+v", it)
	}
	if r.Judge == nil || r.Judge.Calls != 3 || r.Judge.Name != "test/script" || len(r.Judge.Models) != 1 {
		t.Errorf("judge info %+v", r.Judge)
	}
	// Pages: documents only (no image, no iframe); 404s grouped by key.
	if len(r.Pages.Opened) != 4 || r.Pages.Opened[0].Title != "All products" {
		t.Errorf("pages %+v", r.Pages.Opened)
	}
	nf := r.Pages.NotFound
	if len(nf) != 2 || nf[0].Count != 2 || nf[0].Source != "miss" || nf[0].FirstURL != miss404.URL || nf[0].Route != "/catalogue/x.html" || nf[0].Site != "books.toscrape.com" {
		t.Errorf("not found %+v", nf)
	}
	if nf[1].Source != "exact" || nf[1].Key != site404.Key {
		t.Errorf("recorded 404 %+v", nf[1])
	}
	if len(r.Extracted) != 2 || r.Extracted[0].Value != 54.23 || r.Extracted[0].Currency != "GBP" || string(r.Extracted[0].Raw) != `"£54.23"` {
		t.Errorf("extracted %+v", r.Extracted)
	}
	// The answer reaches the judge as data, with the task.
	if !strings.Contains(j.prompts[0], "<answer>\nSapiens costs £54.23.\n</answer>") || !strings.Contains(j.prompts[0], "What does Sapiens cost?") {
		t.Errorf("extraction prompt:\n%s", j.prompts[0])
	}
}

func TestGradeRequiredFailureScoresZero(t *testing.T) {
	j := &scriptJudge{answer: func(p string, _ int) (string, error) {
		if strings.Contains(p, "Extract these fields") {
			return `{"price": "$51.77", "title": "Sapiens"}`, nil
		}
		return `{"answer": "yes", "reason": "ok"}`, nil
	}}
	in := Input{Task: "books", Grading: mustGrading(t, booksGrading), Answer: AnswerFromBytes([]byte("It is $51.77")), Log: logOf(homeHit, basket)}
	r := Grade(context.Background(), in, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusScored || *r.Score != 0 || r.Passed {
		t.Fatalf("status %s score %v", r.Status, r.Score)
	}
	for _, it := range r.Items {
		switch it.ID {
		case "price":
			if it.Result != ResultFail || !strings.Contains(it.Reason, "price is 51.77 USD, not 54.23") {
				t.Errorf("price %+v", it)
			}
		case "no_basket":
			if it.Result != ResultFail || it.Request == nil || it.Request.Method != "POST" || it.Request.Line != 2 {
				t.Errorf("no_basket %+v", it)
			}
		}
	}
}

func TestGradeNoAnswerNoGrading(t *testing.T) {
	j := &scriptJudge{answer: goodJudge}
	r := Grade(context.Background(), Input{Task: "t", Log: logOf(homeHit, miss404)}, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusNotScored || r.Score != nil || len(r.Pages.Opened) != 2 || len(r.Pages.NotFound) != 1 {
		t.Errorf("no grading: %+v", r)
	}
	r = Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, booksGrading), Log: logOf(homeHit)}, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusNotScored || r.Score != nil || j.calls != 0 {
		t.Errorf("no answer: status %s score %v calls %d", r.Status, r.Score, j.calls)
	}
	for _, it := range r.Items {
		if it.Kind != KindTrace && it.Result != ResultSkipped {
			t.Errorf("item %s: %s, want skipped", it.ID, it.Result)
		}
	}
}

func TestGradeBadAnswers(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		problem string
		judged  bool
	}{
		{"empty", []byte("  \n"), AnswerEmpty, false},
		{"huge", []byte(strings.Repeat("a", MaxAnswerSize+1)), AnswerTooLarge, false},
		{"latin1", []byte("Sapiens costs \xa354.23"), AnswerNotUTF8, true},
		{"html", []byte("<!DOCTYPE html><html><head><script>alert(1)</script></head><body><p>Sapiens costs £54.23</p></body></html>"), AnswerHTML, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &scriptJudge{answer: goodJudge}
			a := AnswerFromBytes(c.data)
			if !strings.Contains(a.Problem, c.problem) {
				t.Fatalf("problem %q, want %q", a.Problem, c.problem)
			}
			r := Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, booksGrading), Answer: a, Log: logOf(homeHit)}, Options{Judge: &Cache{Judge: j}})
			if r.Status != StatusScored {
				t.Fatalf("status %s %v", r.Status, r.Notes)
			}
			if (j.calls > 0) != c.judged {
				t.Errorf("judge calls %d, judged want %v", j.calls, c.judged)
			}
			if !c.judged && *r.Score != 0 {
				t.Errorf("ungradable answer scored %v", *r.Score)
			}
			if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "answer:") {
				t.Errorf("notes %v", r.Notes)
			}
			if c.name == "html" && (strings.Contains(a.Text, "alert") || a.Text != "Sapiens costs £54.23") {
				t.Errorf("html text %q", a.Text)
			}
			if c.name == "latin1" && !strings.Contains(a.Text, "\uFFFD54.23") {
				t.Errorf("latin1 text %q", a.Text)
			}
		})
	}
	// Text that merely mentions a tag is not HTML.
	if a := AnswerFromBytes([]byte("Use the <b> tag for bold.")); a.Problem != "" {
		t.Errorf("prose with a tag: %q", a.Problem)
	}
}

func TestGradeJudgeFailures(t *testing.T) {
	cases := []struct {
		name   string
		answer func(string, int) (string, error)
		calls  int
		want   string
	}{
		{"prose twice", func(string, int) (string, error) { return "The price seems right to me.", nil }, 6, "could not be used twice"},
		{"wrong type", func(p string, _ int) (string, error) {
			if strings.Contains(p, "Extract") {
				return `{"price": {"amount": 54.23}, "title": "x"}`, nil
			}
			return `{"answer": "maybe"}`, nil
		}, 6, "field price: want a string with an amount of money, got an object"},
		{"missing key", func(p string, _ int) (string, error) { return `{"price": "£1"}`, nil }, 6, `no key "title"`},
		{"error", func(string, int) (string, error) { return "", errors.New("judge timed out after 2m0s") }, 3, "judge timed out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := &scriptJudge{answer: c.answer}
			r := Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, booksGrading), Answer: AnswerFromBytes([]byte("£54.23")), Log: logOf(homeHit)}, Options{Judge: &Cache{Judge: j}})
			if r.Status != StatusError || r.Score != nil {
				t.Fatalf("status %s score %v", r.Status, r.Score)
			}
			if j.calls != c.calls {
				t.Errorf("judge calls %d, want %d", j.calls, c.calls)
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), c.want) {
				t.Errorf("notes %q, want %q", r.Notes, c.want)
			}
			for _, it := range r.Items {
				if it.Kind != KindTrace && it.Result != ResultError {
					t.Errorf("item %s %s, want error", it.ID, it.Result)
				}
			}
			// The result still encodes and renders.
			dir := t.TempDir()
			if err := r.WriteFiles(dir); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A bad first reply is asked again once with the problem, then used.
	j := &scriptJudge{answer: func(p string, n int) (string, error) {
		if strings.Contains(p, "could not be used") {
			return goodJudge(p, n)
		}
		return "Sure! The price is £54.23.", nil
	}}
	r := Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, booksGrading), Answer: AnswerFromBytes([]byte("£54.23 for Sapiens")), Log: logOf(homeHit)}, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusScored || j.calls != 6 { // every question asked twice: prose, then JSON
		t.Errorf("retry: status %s calls %d notes %v", r.Status, j.calls, r.Notes)
	}
	// No judge configured but one is needed.
	r = Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, booksGrading), Answer: AnswerFromBytes([]byte("x")), Log: logOf(homeHit)}, Options{})
	if r.Status != StatusError || !strings.Contains(strings.Join(r.Notes, " "), "no judge is configured") {
		t.Errorf("no judge: %s %v", r.Status, r.Notes)
	}
}

func TestGradeSamplesMajority(t *testing.T) {
	j := &scriptJudge{answer: func(p string, n int) (string, error) {
		if strings.Contains(p, "Extract") {
			if n == 2 {
				return `{"price": "£45.17", "title": "Sapiens"}`, nil
			}
			return `{"price": "£54.23", "title": "Sapiens"}`, nil
		}
		if strings.Contains(p, "polite") {
			return `{"answer": "no", "reason": "curt"}`, nil
		}
		if n%2 == 0 {
			return `{"answer": "no", "reason": "no currency"}`, nil
		}
		return `{"answer": "yes", "reason": "says £"}`, nil
	}}
	dir := t.TempDir()
	c := &Cache{Judge: j, Dir: dir}
	in := Input{Task: "t", Grading: mustGrading(t, booksGrading), Answer: AnswerFromBytes([]byte("£54.23 Sapiens")), Log: logOf(homeHit)}
	r := Grade(context.Background(), in, Options{Judge: c, Samples: 3})
	if r.Status != StatusScored {
		t.Fatalf("%s %v", r.Status, r.Notes)
	}
	if e := r.Extracted[0]; e.Value != 54.23 || e.Agreement < 0.66 || e.Agreement > 0.67 {
		t.Errorf("majority price %+v", e)
	}
	if r.Judge.Calls != 9 || r.Judge.Cached != 0 {
		t.Errorf("calls %+v", r.Judge)
	}
	// Grading again is answered from the cache: same bytes, no judge call.
	calls := j.calls
	r2 := Grade(context.Background(), in, Options{Judge: c, Samples: 3})
	if j.calls != calls || r2.Judge.Cached != 9 {
		t.Errorf("regrade called the judge: %d -> %d, cached %d", calls, j.calls, r2.Judge.Cached)
	}
	r.Judge, r2.Judge = nil, nil
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(r2)
	if string(a) != string(b) {
		t.Errorf("regrade differs:\n%s\n%s", a, b)
	}
}

func TestGradeNotExecutable(t *testing.T) {
	src := booksGrading + `not_executable:
  - id: bot_check
    reason: the recording hit a captcha page
    when: { url: "*/captcha*" }
`
	j := &scriptJudge{answer: goodJudge}
	captcha := replay.LogLine{Time: "t", Method: "GET", URL: "https://books.toscrape.com/captcha?r=1", Source: "exact", Status: 200, Dest: "document"}
	r := Grade(context.Background(), Input{Task: "t", Grading: mustGrading(t, src), Answer: AnswerFromBytes([]byte("£54.23")), Log: logOf(homeHit, captcha)}, Options{Judge: &Cache{Judge: j}})
	if r.Status != StatusNotExecutable || r.Score != nil || j.calls != 0 {
		t.Fatalf("status %s score %v calls %d", r.Status, r.Score, j.calls)
	}
	if !strings.Contains(r.Notes[0], "bot_check") || !strings.Contains(r.Notes[0], "captcha page") {
		t.Errorf("notes %v", r.Notes)
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*/checkout/place*", "https://shop.test/checkout/place-order?x=1", true},
		{"*/checkout/place*", "https://shop.test/checkout/review", false},
		{"https://a/*", "https://a/", true},
		{"https://a/*", "http://a/", false},
		{"*", "", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"*/p?q=1", "https://h/p?q=1", true}, // ? is literal
		{"*/p?q=1", "https://h/pxq=1", false},
		{"**x", "yyx", true},
	}
	for _, c := range cases {
		if got := GlobMatch(c.p, c.s); got != c.want {
			t.Errorf("GlobMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
	// No exponential blow-up.
	if GlobMatch(strings.Repeat("*a", 30)+"b", strings.Repeat("a", 5000)) {
		t.Error("pathological pattern matched")
	}
}

func TestReadLogTolerant(t *testing.T) {
	good, _ := json.Marshal(homeHit)
	other, _ := json.Marshal(miss404)
	data := string(good) + "\n" +
		"\n" +
		`{"time":"x","method":"GET","url":"https://a/","sou` + "\n" + // truncated
		"not json at all\n" +
		`{"hello":"world"}` + "\n" +
		"[1,2]\n" +
		string(other) + "\n" +
		`{"method":"GET","url":"https://b/","source":"exact"` // cut without newline
	lr, err := ReadLog(strings.NewReader(data), "replay.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Requests) != 2 || lr.Bad != 5 || lr.Lines != 7 {
		t.Fatalf("requests %d bad %d lines %d: %+v", len(lr.Requests), lr.Bad, lr.Lines, lr.BadLines)
	}
	// Line numbers are the file's, the blank line counted, as a person opening the file
	// counts them.
	if lr.BadLines[0].Line != 3 || lr.BadLines[4].Line != 8 {
		t.Errorf("bad line numbers %+v", lr.BadLines)
	}
	// An over-long line is skipped without reading it into memory whole.
	long := string(good) + "\n" + `{"x":"` + strings.Repeat("a", MaxLogLine) + `"}` + "\n" + string(other) + "\n"
	lr, err = ReadLog(strings.NewReader(long), "l")
	if err != nil || len(lr.Requests) != 2 || lr.Bad != 1 || !strings.Contains(lr.BadLines[0].Problem, "longer than") {
		t.Errorf("long line: %v %+v", err, lr)
	}
	// Grading reports the bad lines in a note.
	r := Grade(context.Background(), Input{Task: "t", Log: &LogRead{File: "l", Lines: 3, Bad: 1, BadLines: []BadLine{{Line: 2, Problem: "not JSON"}}, Requests: []replay.LogLine{homeHit}}}, Options{})
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "1 of 3 lines of the replay log could not be read") {
		t.Errorf("notes %v", r.Notes)
	}
}

func TestParseVerdict(t *testing.T) {
	cases := []struct {
		in      string
		yes, ok bool
		reason  string
	}{
		{`{"answer": "yes", "reason": "It says so."}`, true, true, "It says so."},
		{"```json\n{\"answer\": \"No\", \"reason\": \"missing\"}\n```", false, true, "missing"},
		{`{"answer": true}`, true, true, ""},
		{"Yes - the answer names the book.", true, true, "the answer names the book."},
		{"no\nThe answer is in dollars.", false, true, "The answer is in dollars."},
		{"Probably.", false, false, ""},
		{`{"answer": "maybe"}`, false, false, ""},
		{`{"verdict": "yes"}`, false, false, ""},
		{"", false, false, ""},
	}
	for _, c := range cases {
		v, err := parseVerdict(c.in)
		if (err == nil) != c.ok || (c.ok && (v.yes != c.yes || v.reason != c.reason)) {
			t.Errorf("parseVerdict(%q) = %+v, %v", c.in, v, err)
		}
	}
}

func TestWriteFilesAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := Grade(context.Background(), Input{Task: "t", Log: logOf(homeHit)}, Options{})
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files %v (temporary files left?)", entries)
	}
	back, err := ReadResult(filepath.Join(dir, "result.json"))
	if err != nil || back.Status != StatusNotScored || len(back.Pages.Opened) != 1 {
		t.Errorf("read back %+v %v", back, err)
	}
}

func FuzzReadLog(f *testing.F) {
	good, _ := json.Marshal(homeHit)
	f.Add(string(good) + "\n")
	f.Add("{\"method\":\"GET\"\n\n[]\nnull\n")
	f.Fuzz(func(t *testing.T, data string) {
		lr, err := ReadLog(strings.NewReader(data), "f")
		if err != nil {
			t.Fatal(err)
		}
		if len(lr.Requests)+lr.Bad != lr.Lines {
			t.Fatalf("lines %d != requests %d + bad %d", lr.Lines, len(lr.Requests), lr.Bad)
		}
	})
}

func FuzzParseVerdictAndExtraction(f *testing.F) {
	f.Add(`{"answer": "yes", "reason": "r"}`)
	f.Add(`{"price": "£1", "title": null}`)
	f.Add("yes")
	fields := mustGradingF(booksGrading).Extract
	f.Fuzz(func(t *testing.T, s string) {
		parseVerdict(s)
		if m, err := parseExtraction(s, fields); err == nil && len(m) != len(fields) {
			t.Fatalf("accepted %d of %d fields", len(m), len(fields))
		}
	})
}

func mustGradingF(src string) *Grading {
	g, err := ParseGrading("g", []byte(src))
	if err != nil {
		panic(err)
	}
	return g
}

func TestGradeLogProblems(t *testing.T) {
	g := mustGrading(t, "trace:\n  - id: no_order\n    must_not: { method: POST, url: '*/order*' }\n")
	// Every line bad: an error, not a pass of every must_not.
	r := Grade(context.Background(), Input{Task: "t", Grading: g, Answer: AnswerFromBytes([]byte("x")), Log: &LogRead{File: "l", Lines: 3, Bad: 3, BadLines: []BadLine{{Line: 1, Problem: "not JSON"}}}}, Options{})
	if r.Status != StatusError || r.Score != nil || !strings.Contains(strings.Join(r.Notes, " "), "no line of the replay log l could be read") {
		t.Errorf("all bad: %s %v %v", r.Status, r.Score, r.Notes)
	}
	// An empty log is graded, with a note.
	r = Grade(context.Background(), Input{Task: "t", Grading: g, Answer: AnswerFromBytes([]byte("x")), Log: &LogRead{File: "l"}}, Options{})
	if r.Status != StatusScored || !strings.Contains(strings.Join(r.Notes, " "), "the replay log is empty") {
		t.Errorf("empty: %s %v", r.Status, r.Notes)
	}
	// A log from another task gets a note.
	hosts := map[string]bool{"books.toscrape.com": true}
	other := replay.LogLine{Method: "GET", URL: "https://www.archive.org/", Source: "exact", Status: 200}
	r = Grade(context.Background(), Input{Task: "t", Grading: g, Answer: AnswerFromBytes([]byte("x")), Log: logOf(other), RecordedHosts: hosts}, Options{})
	if !strings.Contains(strings.Join(r.Notes, " "), "is the log from another task") {
		t.Errorf("foreign log: %v", r.Notes)
	}
	r = Grade(context.Background(), Input{Task: "t", Grading: g, Answer: AnswerFromBytes([]byte("x")), Log: logOf(homeHit, other), RecordedHosts: hosts}, Options{})
	if strings.Contains(strings.Join(r.Notes, " "), "another task") {
		t.Errorf("own log flagged: %v", r.Notes)
	}
}

func TestVerdictReasonMustBeText(t *testing.T) {
	if _, err := parseVerdict(`{"answer": true, "reason": 5}`); err == nil {
		t.Error("a numeric reason was accepted")
	}
	if v, err := parseVerdict(`{"answer": "no", "reason": null}`); err != nil || v.yes {
		t.Errorf("null reason: %+v %v", v, err)
	}
}

// A reply that cannot be used is not kept in the cache: the next grading asks again.
func TestUnusableReplyNotCached(t *testing.T) {
	j := &scriptJudge{answer: func(string, int) (string, error) { return "I think so.", nil }}
	c := &Cache{Judge: j, Dir: t.TempDir()}
	in := Input{Task: "t", Grading: mustGrading(t, "checks:\n  - {id: c, question: q}\n"), Answer: AnswerFromBytes([]byte("x"))}
	Grade(context.Background(), in, Options{Judge: c})
	first := j.calls
	Grade(context.Background(), in, Options{Judge: c})
	if first != 2 || j.calls != 4 {
		t.Errorf("judge calls %d then %d; want 2 then 4 (bad replies asked again)", first, j.calls)
	}
}
