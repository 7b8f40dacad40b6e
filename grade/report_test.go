package grade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/testtool"

	"golang.org/x/net/html"
)

const (
	reportHostileAnswer = "The cheapest is <script>alert(1)</script> at $12.99 & \"free\" shipping"
	reportHostileURL    = `https://shop.test/p?q="><img src=x onerror=alert(2)>`
	reportHostileReason = `the answer says </td></tr></table><b>bold</b> 'x'`
	reportHostileTitle  = `Shop </title><script>alert(3)</script>`
)

func reportFptr(f float64) *float64 { return &f }

// reportFullResult is a scored (failed, 2 of 3 weight) run with every field set, hostile strings
// included.
func reportFullResult() *Result {
	long := strings.Repeat("word ", 400) + strings.Repeat("x", 3000)
	return &Result{
		Format:  ResultFormat,
		Task:    "shop-cheapest-airpods",
		Title:   "Find the cheapest AirPods Pro " + reportHostileTitle,
		Prompt:  "Find the cheapest AirPods Pro on shop.test.\nGive the price and the seller.",
		Status:  StatusScored,
		Score:   reportFptr(2.0 / 3.0),
		Passed:  false,
		Notes:   []string{"the answer is HTML; graded as text", "note with <b>markup</b>"},
		Grading: "tasks/shop-cheapest-airpods/grading.yaml",
		Judge: &JudgeInfo{
			Name: "anthropic/claude-opus-5-5", Models: []string{"claude-opus-5-5", "claude-sonnet-5"},
			Samples: 3, Calls: 9, Cached: 4,
		},
		Answer: &AnswerInfo{
			File: "out/answer.txt", Bytes: 5000,
			Text:    reportHostileAnswer + "\n\n  indented line\n" + long,
			Problem: "html",
		},
		Extracted: []Extracted{
			{Field: "price", Type: "money", Raw: json.RawMessage(`{ "amount": 12.99, "currency": "USD" }`),
				Value: 12.99, Currency: "USD", Agreement: 1},
			{Field: "seller", Type: "text", Raw: json.RawMessage(`"<script>alert(4)</script>"`),
				Value: "<script>alert(4)</script>", Agreement: 2.0 / 3.0},
			{Field: "in_stock", Type: "boolean", Raw: json.RawMessage(`"maybe"`), Value: nil,
				Problem: "not a boolean: \"maybe\"", Agreement: 1},
		},
		Items: []Item{
			{ID: "price-ok", Kind: KindRequire, Required: true, Result: ResultPass,
				Reason: "12.99 is within 0.01 of 12.99", Expected: "12.99 USD", Actual: "12.99 USD", Line: 12},
			{ID: "names-seller", Kind: KindCheck, Weight: 2, Result: ResultPass,
				Reason: "the judge said yes", Expected: "Does the answer name the seller?", Actual: "yes",
				JudgeReason: reportHostileReason, Agreement: 2.0 / 3.0, Line: 20},
			{ID: "opened-product", Kind: KindTrace, Weight: 0.5, Result: ResultFail,
				Reason: "no request matched", Expected: "GET shop.test/dp/*",
				Request: &Request{Line: 7, Time: "2025-03-01T10:00:02.123Z", Method: "GET", URL: reportHostileURL,
					Status: 200, Source: "exact"}, Line: 30},
			{ID: "judge-down", Kind: KindCheck, Weight: 1, Result: ResultError, Reason: "the judge could not answer"},
			{ID: "skipped-one", Kind: KindCheck, Weight: 1.25, Result: ResultSkipped, Reason: "grading stopped"},
		},
		Pages: Pages{
			Opened: []Page{
				{Time: "2025-03-01T10:00:00.000Z", Method: "GET", URL: "https://shop.test/", Status: 200,
					Source: "exact", Title: "Shop — home"},
				{Time: "2025-03-01T10:00:02.123Z", Method: "GET", URL: reportHostileURL, Status: 200, Source: "fuzzy",
					Title: reportHostileTitle},
				{Time: "2025-03-01T10:00:05.000Z", Method: "GET",
					URL:    "https://shop.test/s?k=" + strings.Repeat("airpods%20pro%20", 40),
					Status: 404, Source: "miss"},
				{Time: "2025-03-01T10:00:06.000Z", Method: "GET", URL: "https://shop.test/gone", Status: 404,
					Source: "exact"},
			},
			NotFound: []NotFound{
				{Key: "GET shop.test/s?k=airpods", Site: "shop.test", Route: "search",
					FirstURL: "https://shop.test/s?k=" + strings.Repeat("airpods%20pro%20", 40), Count: 3, Source: "miss"},
				{Key: "GET shop.test/gone", Site: "shop.test", Route: "/gone",
					FirstURL: "https://shop.test/gone", Count: 1, Source: "exact"},
			},
		},
		Log: &LogRead{File: "runs/1/replay.jsonl", Lines: 120, Bad: 23,
			BadLines: []BadLine{{Line: 5, Problem: "not JSON: unexpected end of JSON input"},
				{Line: 9, Problem: "not a replay log line (needs method, url and source)"}}},
		Requests: map[string]int{"exact": 80, "fuzzy": 10, "miss": 5, "blocked": 2},
	}
}

func reportRender(t *testing.T, r *Result) (string, *html.Node) {
	t.Helper()
	out, err := RenderReport(r)
	if err != nil {
		t.Fatalf("RenderReport: %v", err)
	}
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("parse report: %v", err)
	}
	return string(out), doc
}

// reportWalk calls f on every node under n.
func reportWalk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		reportWalk(c, f)
	}
}

// reportText is the text content of n (style sheets left out).
func reportText(n *html.Node) string {
	var b strings.Builder
	reportWalk(n, func(m *html.Node) {
		if m.Type == html.TextNode && (m.Parent == nil || m.Parent.Data != "style") {
			b.WriteString(m.Data)
		}
	})
	return b.String()
}

func reportAttr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func reportHasClass(n *html.Node, class string) bool {
	v, _ := reportAttr(n, "class")
	for _, c := range strings.Fields(v) {
		if c == class {
			return true
		}
	}
	return false
}

// reportFind returns the first element with the tag (any if "") and class (any if "").
func reportFind(doc *html.Node, tag, class string) *html.Node {
	var got *html.Node
	reportWalk(doc, func(n *html.Node) {
		if got == nil && n.Type == html.ElementNode && (tag == "" || n.Data == tag) && (class == "" || reportHasClass(n, class)) {
			got = n
		}
	})
	return got
}

// reportCheckSafe fails the test when the page could run script or load anything.
func reportCheckSafe(t *testing.T, doc *html.Node) {
	t.Helper()
	styles := 0
	reportWalk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script", "img", "iframe", "object", "embed", "link", "base", "frame", "video", "audio",
			"source", "svg", "math", "form", "input", "button", "textarea":
			t.Errorf("report has a <%s> element", n.Data)
		case "style":
			styles++
			css := ""
			if n.FirstChild != nil {
				css = strings.ToLower(n.FirstChild.Data)
			}
			for _, bad := range []string{"url(", "@import", "@font-face", "expression("} {
				if strings.Contains(css, bad) {
					t.Errorf("style sheet contains %q", bad)
				}
			}
		case "meta":
			if v, _ := reportAttr(n, "http-equiv"); strings.EqualFold(v, "refresh") {
				t.Errorf("report has a meta refresh")
			}
		}
		for _, a := range n.Attr {
			k := strings.ToLower(a.Key)
			if strings.HasPrefix(k, "on") {
				t.Errorf("<%s> has event handler attribute %s=%q", n.Data, a.Key, a.Val)
			}
			switch k {
			case "src", "srcset", "poster", "action", "formaction", "data", "background", "xlink:href", "ping":
				t.Errorf("<%s> loads a resource: %s=%q", n.Data, a.Key, a.Val)
			case "href":
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if n.Data != "a" && (strings.HasPrefix(v, "http:") || strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "//")) {
					t.Errorf("<%s> points to %q", n.Data, a.Val)
				}
				if strings.HasPrefix(v, "javascript:") {
					t.Errorf("<%s> has a javascript: link", n.Data)
				}
			case "style":
				if strings.Contains(strings.ToLower(a.Val), "url(") {
					t.Errorf("<%s> style attribute loads %q", n.Data, a.Val)
				}
			}
		}
	})
	if styles != 1 {
		t.Errorf("report has %d <style> elements, want exactly 1", styles)
	}
	csp := false
	reportWalk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "meta" {
			if v, _ := reportAttr(n, "http-equiv"); strings.EqualFold(v, "Content-Security-Policy") {
				c, _ := reportAttr(n, "content")
				csp = strings.Contains(c, "default-src 'none'")
			}
		}
	})
	if !csp {
		t.Errorf("report has no Content-Security-Policy with default-src 'none'")
	}
}

func TestRenderReportHostileAndComplete(t *testing.T) {
	r := reportFullResult()
	out, doc := reportRender(t, r)
	reportCheckSafe(t, doc)

	// Hostile strings come back as text, never as markup.
	for _, s := range []string{"<script>alert", "<img src=x", "</td></tr></table><b>", "<b>markup</b>"} {
		if strings.Contains(out, s) {
			t.Errorf("raw markup %q is in the page source", s)
		}
	}
	text := reportText(doc)
	for _, s := range []string{reportHostileAnswer, reportHostileURL, reportHostileReason, reportHostileTitle, "<script>alert(4)</script>",
		"note with <b>markup</b>"} {
		if !strings.Contains(text, s) {
			t.Errorf("text %q missing from the page text", s)
		}
	}
	// The answer is shown whole, byte for byte, in its <pre>.
	pre := reportFind(doc, "pre", "answer")
	if pre == nil {
		t.Fatal("no <pre class=answer>")
	}
	if got := reportText(pre); got != r.Answer.Text {
		t.Errorf("answer <pre> text differs from the answer (%d vs %d bytes)", len(got), len(r.Answer.Text))
	}

	badge := reportFind(doc, "", "badge")
	if badge == nil {
		t.Fatal("no status badge")
	}
	if bt := reportText(badge); !strings.Contains(bt, "66.7%") || !strings.Contains(bt, "FAIL") {
		t.Errorf("badge = %q, want 66.7%% and FAIL", bt)
	}
	for _, it := range r.Items {
		if !strings.Contains(text, it.ID) {
			t.Errorf("item id %q missing", it.ID)
		}
	}
	for _, p := range r.Pages.Opened {
		if !strings.Contains(text, p.URL) {
			t.Errorf("page URL %q missing", p.URL)
		}
	}
	for _, want := range []string{
		"Find the cheapest AirPods Pro on shop.test.\nGive the price and the seller.",
		"required", "weight 2", "weight 0.5", "weight 1.25",
		"✓ pass", "✗ fail", "! error", "– skipped",
		"2 of 3 samples agreed (66.7%)",
		"log line 7", "2025-03-01T10:00:02.123Z",
		"12.99 USD", `{"amount":12.99,"currency":"USD"}`, `not a boolean: "maybe"`,
		"out/answer.txt", "5000 bytes (4.9 KiB)", "Problem: html",
		"Shop — home",
		"not in the recording", "the site answered 404 while recording (exact)",
		"anthropic/claude-opus-5-5", "claude-opus-5-5, claude-sonnet-5", "3 samples per question", "9 calls",
		"tasks/shop-cheapest-airpods/grading.yaml",
		"runs/1/replay.jsonl", "120 lines, 23 bad",
		"line 5: not JSON: unexpected end of JSON input", "and 21 more",
		"97 in all: 80 exact, 10 fuzzy, 5 miss, 2 blocked",
		"5 items: 2 pass, 1 fail, 1 error, 1 skipped",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}
	// Agreement is shown only when not unanimous.
	if strings.Contains(text, "3 of 3") {
		t.Errorf("unanimous agreement shown")
	}

	// Same result, same bytes (the map of request counts is sorted).
	again, _ := RenderReport(r)
	if !bytes.Equal(again, []byte(out)) {
		t.Errorf("two renders of the same result differ")
	}
}

func TestRenderReportStatuses(t *testing.T) {
	cases := []struct {
		name  string
		r     *Result
		badge []string
		text  []string
		alarm bool
	}{
		{"scored pass", &Result{Task: "t1", Status: StatusScored, Score: reportFptr(1), Passed: true,
			Items: []Item{{ID: "only", Kind: KindRequire, Required: true, Result: ResultPass}}},
			[]string{"100%", "PASS"}, []string{"only", "1 item: 1 pass"}, false},
		{"scored fail", &Result{Task: "t2", Status: StatusScored, Score: reportFptr(0.5),
			Items: []Item{{ID: "a", Kind: KindCheck, Weight: 1, Result: ResultPass},
				{ID: "b", Kind: KindCheck, Weight: 1, Result: ResultFail}}},
			[]string{"50%", "FAIL"}, []string{"2 items: 1 pass, 1 fail"}, false},
		{"scored zero", &Result{Task: "t2b", Status: StatusScored, Score: reportFptr(0)},
			[]string{"0%", "FAIL"}, nil, false},
		{"not scored", &Result{Task: "t3", Status: StatusNotScored, Pages: Pages{Opened: []Page{
			{Method: "GET", URL: "https://a.test/x", Status: 200, Source: "exact"}}}},
			[]string{"NOT SCORED"}, []string{"None: nothing was graded.", "None: no answer was given.", "https://a.test/x"}, false},
		{"not executable", &Result{Task: "t4", Status: StatusNotExecutable, Notes: []string{"login wall reached"},
			Items: []Item{{ID: "login-wall", Kind: KindTrace, Result: ResultFail}}},
			[]string{"NOT EXECUTABLE"}, []string{"login wall reached", "not a score of 0"}, false},
		{"error", &Result{Task: "t5", Status: StatusError, Notes: []string{"judge failed: 529 overloaded"}},
			[]string{"ERROR"}, []string{"judge failed: 529 overloaded"}, true},
		{"unknown", &Result{Task: "t6", Status: "weird<status>"},
			[]string{"UNKNOWN STATUS"}, []string{`"weird<status>"`}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, doc := reportRender(t, c.r)
			reportCheckSafe(t, doc)
			badge := reportFind(doc, "", "badge")
			if badge == nil {
				t.Fatal("no badge")
			}
			bt := reportText(badge)
			for _, w := range c.badge {
				if !strings.Contains(bt, w) {
					t.Errorf("badge %q lacks %q", bt, w)
				}
			}
			if c.r.Status != StatusScored && strings.Contains(bt, "%") {
				t.Errorf("badge %q shows a score for status %s", bt, c.r.Status)
			}
			text := reportText(doc)
			for _, w := range c.text {
				if !strings.Contains(text, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			notes := reportFind(doc, "div", "notes")
			if (len(c.r.Notes) > 0) != (notes != nil) {
				t.Errorf("notes box present = %v, notes = %d", notes != nil, len(c.r.Notes))
			}
			if notes != nil {
				if reportHasClass(notes, "alarm") != c.alarm {
					t.Errorf("notes alarm = %v, want %v", reportHasClass(notes, "alarm"), c.alarm)
				}
				for _, n := range c.r.Notes {
					if !strings.Contains(reportText(notes), n) {
						t.Errorf("note %q not in the notes box", n)
					}
				}
			}
		})
	}
}

func TestRenderReportEmpty(t *testing.T) {
	if _, err := RenderReport(nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Errorf("RenderReport(nil) error = %v, want one naming nil", err)
	}
	for name, r := range map[string]*Result{
		"zero":    {},
		"no data": {Task: "x", Status: StatusNotScored, Pages: Pages{Opened: []Page{}, NotFound: []NotFound{}}},
		"empty answer and field": {Task: "y", Status: StatusScored, Score: reportFptr(1), Passed: true,
			Answer:    &AnswerInfo{Problem: "empty"},
			Extracted: []Extracted{{Field: "f"}},
			Items:     []Item{{}},
			Log:       &LogRead{},
			Judge:     &JudgeInfo{}},
	} {
		t.Run(name, func(t *testing.T) {
			_, doc := reportRender(t, r)
			reportCheckSafe(t, doc)
			text := reportText(doc)
			for _, h := range []string{"Items", "Extracted fields", "The answer", "Pages the agent opened", "Not found (404)"} {
				if !strings.Contains(text, h) {
					t.Errorf("section %q missing", h)
				}
			}
			if r.Judge == nil && !strings.Contains(text, "none needed") {
				t.Errorf("no judge not said")
			}
			if len(r.Pages.Opened) == 0 && strings.Count(text, "None.") < 2 {
				t.Errorf("empty page lists not said to be empty")
			}
		})
	}
}

// TestRenderReportLeadingNewline: an answer that starts with a blank line keeps it (an HTML
// parser drops one newline right after <pre>).
func TestRenderReportLeadingNewline(t *testing.T) {
	r := &Result{Task: "n", Status: StatusScored, Score: reportFptr(1), Passed: true,
		Answer: &AnswerInfo{Bytes: 9, Text: "\n\nanswer\n"}}
	_, doc := reportRender(t, r)
	if got := reportText(reportFind(doc, "pre", "answer")); got != r.Answer.Text {
		t.Errorf("answer text = %q, want %q", got, r.Answer.Text)
	}
}

func TestReportFormatting(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{reportPercent(2.0 / 3.0), "66.7%"},
		{reportPercent(1), "100%"},
		{reportPercent(0), "0%"},
		{reportPercent(0.5), "50%"},
		{reportPercent(0.125), "12.5%"},
		{reportPercent(-0.0001), "0%"},
		{reportNumber(2), "2"},
		{reportNumber(0.5), "0.5"},
		{reportNumber(1.25), "1.25"},
		{reportAgreement(2.0/3.0, 3), "2 of 3 samples agreed (66.7%)"},
		{reportAgreement(0.6, 5), "3 of 5 samples agreed (60%)"},
		{reportAgreement(0.55, 3), "55% of samples agreed"},
		{reportAgreement(0.5, 0), "50% of samples agreed"},
		{reportHTTPStatus(0), "—"},
		{reportHTTPStatus(404), "404"},
		{reportBytes(1), "1 byte"},
		{reportBytes(1 << 20), "1048576 bytes (1.0 MiB)"},
		{reportValue(12.5), "12.5"},
		{reportValue(true), "true"},
		{reportValue([]any{"a", 1.0}), `["a",1]`},
		{reportRaw(nil), "null"},
		{reportRaw(json.RawMessage("{bad")), "{bad"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// reportChromium returns Debian's chromium, skipping the test when it is missing outside CI.
func reportChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testtool.Missing(t, "chromium is not installed (apt-get install chromium)")
	return ""
}

// reportRunChromium runs headless chromium with args on the page, in its own process group (killed
// afterwards, so no helper process outlives the test), with a deadline.
func reportRunChromium(t *testing.T, bin, page string, args ...string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
		"--hide-scrollbars", "--user-data-dir=" + dir}, args...)
	all = append(all, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left in the group, if any
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("chromium timed out: %s", out.String())
		}
		t.Fatalf("chromium %v: %v\n%s", args, err, out.String())
	}
}

// TestReportInChromium renders a realistic report, screenshots it with headless Chromium at
// 1200x1600 and at a phone's width, and prints it to PDF. Set PAB_REPORT_SHOT to a directory
// to keep the images.
func TestReportInChromium(t *testing.T) {
	bin := reportChromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	r := reportFullResult()
	r.Title = "Find the cheapest AirPods Pro"
	r.Answer.Text = "The cheapest AirPods Pro on shop.test are sold by Best Audio for $12.99.\n\n" +
		"I searched for \"airpods pro\", opened the first three results and compared prices:\n" +
		"  - Best Audio: $12.99\n  - Gadget Hub: $14.50\n  - <script>alert(1)</script> Store: $19.00\n"
	r.Answer.Bytes = int64(len(r.Answer.Text))
	if err := r.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	keep := os.Getenv("PAB_REPORT_SHOT")
	for _, size := range []struct{ w, h int }{{1200, 1600}, {390, 1400}} {
		shot := filepath.Join(dir, "shot.png")
		os.Remove(shot)
		reportRunChromium(t, bin, page, "--screenshot="+shot, "--window-size="+strconv.Itoa(size.w)+","+strconv.Itoa(size.h))
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("screenshot is not a PNG: %v", err)
		}
		if b := img.Bounds(); b.Dx() != size.w || b.Dy() != size.h {
			t.Errorf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), size.w, size.h)
		}
		if keep != "" {
			if err := os.WriteFile(filepath.Join(keep, "report-shot-"+strconv.Itoa(size.w)+".png"), data, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	pdf := filepath.Join(dir, "report.pdf")
	reportRunChromium(t, bin, page, "--no-pdf-header-footer", "--print-to-pdf="+pdf)
	data, err := os.ReadFile(pdf)
	if err != nil {
		t.Fatalf("no PDF: %v", err)
	}
	if !bytes.HasPrefix(data, []byte("%PDF")) {
		t.Errorf("PDF starts with %q", data[:min(len(data), 8)])
	}
	if keep != "" {
		_ = os.WriteFile(filepath.Join(keep, "report.pdf"), data, 0o644)
	}
}

// FuzzRenderReport puts one arbitrary string in every text field of a result and checks that
// the page keeps its shape (one <pre>, one row per item, page and missing page), runs no
// script, loads nothing, and shows a plain string as text.
func FuzzRenderReport(f *testing.F) {
	f.Add("<script>alert(1)</script>", 0.5, StatusScored)
	f.Add(`"><img src=x onerror=alert(1)>`, 1.0, StatusError)
	f.Add("</pre></td></tr></table><style>*{background:url(http://x/)}</style>", 0.0, StatusNotScored)
	f.Add("\x00\r\n\xff{{.}}", -1.0, "")
	f.Fuzz(func(t *testing.T, s string, score float64, status string) {
		r := &Result{
			Task: s, Title: s, Prompt: s, Status: status, Score: &score, Notes: []string{s},
			Grading: s, Judge: &JudgeInfo{Name: s, Models: []string{s}},
			Answer:    &AnswerInfo{File: s, Text: s, Problem: s},
			Extracted: []Extracted{{Field: s, Type: s, Raw: json.RawMessage(s), Value: s, Currency: s, Problem: s, Agreement: score}},
			Items: []Item{{ID: s, Kind: s, Result: s, Reason: s, Expected: s, Actual: s, JudgeReason: s, Agreement: score,
				Request: &Request{Time: s, Method: s, URL: s, Source: s}}},
			Pages: Pages{Opened: []Page{{Time: s, Method: s, URL: s, Source: s, Title: s}},
				NotFound: []NotFound{{Site: s, Route: s, FirstURL: s, Source: s, Key: s}}},
			Log:      &LogRead{File: s, BadLines: []BadLine{{Problem: s}}},
			Requests: map[string]int{s: 1},
		}
		out, err := RenderReport(r)
		if err != nil {
			t.Fatalf("RenderReport: %v", err)
		}
		doc, err := html.Parse(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		counts := map[string]int{}
		reportWalk(doc, func(n *html.Node) {
			if n.Type != html.ElementNode {
				return
			}
			counts[n.Data]++
			for _, a := range n.Attr {
				if k := strings.ToLower(a.Key); strings.HasPrefix(k, "on") || k == "src" || k == "href" {
					t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
				}
			}
		})
		for tag, want := range map[string]int{"script": 0, "img": 0, "style": 1, "pre": 1, "table": 4, "tr": 4 + 1 + 1 + 1 + 1} {
			if counts[tag] != want {
				t.Errorf("%d <%s> elements, want %d", counts[tag], tag, want)
			}
		}
		plain := true
		for _, c := range s {
			if c == utf8.RuneError || (c < ' ' && c != '\n' && c != '\t') || c == 0x7f {
				plain = false
			}
		}
		if plain && strings.TrimSpace(s) != "" {
			if got := reportText(reportFind(doc, "pre", "answer")); got != s {
				t.Errorf("answer shown as %q, want %q", got, s)
			}
		}
	})
}
