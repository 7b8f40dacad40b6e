//go:build !pab_lite

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/replay"
)

// TestRunView (issue 30): pab run --browser --mcp with a scripted agent (testdata/stepagent,
// an MCP client) making five browser_navigate calls on archive-org-jobs — two recorded
// pages, a page that is not in the recording (a miss), then the jobs page — writes
// steps.jsonl and a view.html with five steps, each with a screenshot whose page title is
// the recorded title of the step's URL, request rows carrying the log's sources and entry
// ids, the miss and the fuzzy answers marked; index.html links the view; pab view prints
// its path; the view opened in headless Chromium with no network loads with no failed
// request and every image decoded.
func TestRunView(t *testing.T) {
	chromiumPath(t)
	if _, err := os.Stat(filepath.Join(repoRoot, "tools/playwright-mcp/node_modules/@playwright/mcp/cli.js")); err != nil {
		testtool.Missing(t, "@playwright/mcp is not installed: npm ci --prefix tools/playwright-mcp")
	}
	agentBin := filepath.Join(t.TempDir(), "stepagent")
	if out, err := exec.Command("go", "build", "-o", agentBin, "./testdata/stepagent").CombinedOutput(); err != nil {
		t.Fatalf("build stepagent: %v\n%s", err, out)
	}
	urls := []string{"http://www.archive.org/index.php", "http://www.archive.org/about/about.php",
		"http://www.archive.org/about/no-such-page-pab.php", "http://www.archive.org/details/texts", "http://www.archive.org/about/jobs.php"}
	var plan []string
	for _, u := range urls {
		plan = append(plan, `browser_navigate {"url":"`+u+`"}`)
	}
	t.Setenv("STEPAGENT_PLAN", strings.Join(plan, "\n"))
	right, err := os.ReadFile(filepath.Join(repoRoot, "docs/examples/archive-org-jobs/right/answer.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STEPAGENT_ANSWER", string(right)) // the example judge knows its prompts
	t.Setenv("PAB_PLAYWRIGHT_MCP", "")
	out := filepath.Join(t.TempDir(), "batch")
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--browser", "--mcp", "--proxy-env=false",
		"--timeout", "3m", "--agent", agentBin, "--judge", "cli", "--judge-cmd", exampleJudge, "archive-org-jobs")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	run := filepath.Join(out, "archive-org-jobs", "1")
	s := readSummary(t, out)
	if len(s.Runs) != 1 || s.Runs[0].Status == batch.StatusError || s.Runs[0].Status == batch.StatusAgentFailed {
		e, _ := os.ReadFile(filepath.Join(run, batch.FileStderr))
		t.Fatalf("runs %+v\n%s", s.Runs, e)
	}
	if s.Runs[0].View != "archive-org-jobs/1/view.html" {
		t.Errorf("summary view %q", s.Runs[0].View)
	}
	links, _ := indexLinks(t, filepath.Join(out, batch.FileIndex))
	if !strings.Contains(strings.Join(links, " "), "archive-org-jobs/1/view.html") {
		t.Errorf("index.html does not link the view: %v", links)
	}

	// the recorded titles, and the log's sources after the first step
	titles := map[string]string{}
	pages, _ := os.ReadFile(filepath.Join(repoRoot, "tasks/archive-org-jobs/recording/pages.jsonl"))
	for _, l := range bytes.Split(pages, []byte("\n")) {
		var p struct{ URL, Title string }
		if json.Unmarshal(l, &p) == nil {
			titles[p.URL] = p.Title
		}
	}
	steps, err := batch.ReadSteps(filepath.Join(run, batch.FileSteps))
	if err != nil || len(steps) != 5 {
		t.Fatalf("steps.jsonl: %d steps, %v", len(steps), err)
	}
	for i, st := range steps {
		if st.Screenshot == "" || st.URL == "" {
			t.Errorf("step %d: no screenshot or page: %+v", i+1, st)
			continue
		}
		if want, ok := titles[urls[i]]; ok && st.Title != want {
			t.Errorf("step %d: title %q on %s, want %q (the recording's title of %s)", i+1, st.Title, st.URL, want, urls[i])
		}
		if i == 2 && st.Title != "" && titles[st.URL] != "" {
			t.Errorf("step 3 (a page not recorded): title %q", st.Title)
		}
	}
	logSources := map[string]bool{}
	f, _ := os.Open(filepath.Join(run, batch.FileLog))
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var l replay.LogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Source != "" && l.Time >= steps[0].Start {
			logSources[string(l.Source)] = true
		}
	}
	f.Close()
	if !logSources["miss"] || !logSources["fuzzy"] || !logSources["exact"] {
		t.Fatalf("the run's log has sources %v, want exact, fuzzy and miss", logSources)
	}

	// the view
	viewPath := filepath.Join(run, batch.FileView)
	data, err := os.ReadFile(viewPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 5<<20 {
		t.Errorf("view.html is %d bytes", len(data))
	}
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	type stepView struct {
		imgs           int
		title, url     string
		sources, marks []string
		entries        int
	}
	var views []*stepView
	var cur *stepView
	var walk func(n *html.Node)
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	text := func(n *html.Node) string {
		var b strings.Builder
		var f func(*html.Node)
		f = func(n *html.Node) {
			if n.Type == html.TextNode {
				b.WriteString(n.Data)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				f(c)
			}
		}
		f(n)
		return b.String()
	}
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			cls := attr(n, "class")
			switch {
			case n.Data == "section" && strings.HasPrefix(cls, "step"):
				cur = &stepView{}
				views = append(views, cur)
			case cur != nil && n.Data == "img" && strings.HasPrefix(attr(n, "src"), "data:image/jpeg;base64,"):
				cur.imgs++
			case cur != nil && cls == "title":
				cur.title = text(n)
			case cur != nil && cls == "url":
				cur.url = text(n)
			case cur != nil && cls == "mark":
				cur.marks = append(cur.marks, text(n))
			case cur != nil && cls == "source":
				cur.sources = append(cur.sources, text(n))
				if e := n.NextSibling; e != nil && strings.HasPrefix(text(e), "e") {
					cur.entries++
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(views) != 5 {
		t.Fatalf("view.html has %d steps, want 5", len(views))
	}
	seen := map[string]bool{}
	for i, v := range views {
		if v.imgs != 1 || v.title != steps[i].Title || v.url != steps[i].URL || len(v.sources) == 0 || v.entries == 0 {
			t.Errorf("view step %d: %+v (steps.jsonl %q %q)", i+1, v, steps[i].Title, steps[i].URL)
		}
		for _, s := range v.sources {
			seen[s] = true
		}
	}
	for s := range logSources {
		if !seen[s] {
			t.Errorf("source %s of the log is in no request row of the view (rows have %v)", s, seen)
		}
	}
	if !strings.Contains(strings.Join(views[2].marks, ","), "miss") {
		t.Errorf("step 3 (not recorded) marks %v, want miss", views[2].marks)
	}
	fuzzy := false
	for _, v := range views {
		fuzzy = fuzzy || strings.Contains(strings.Join(v.marks, ","), "fuzzy answer")
	}
	if !fuzzy {
		t.Errorf("no step is marked for its fuzzy answer")
	}

	// pab grade --out writes the same view for the run graded alone
	regraded := t.TempDir()
	if o, e, c := runPab(t, "grade", "archive-org-jobs", "--log", filepath.Join(run, batch.FileLog), "--answer", filepath.Join(run, batch.FileAnswer),
		"--out", regraded, "--judge", "cli", "--judge-cmd", filepath.Join(repoRoot, exampleJudge)); c != 0 {
		t.Errorf("pab grade: exit %d\n%s\n%s", c, o, e)
	} else if v2, err := os.ReadFile(filepath.Join(regraded, batch.FileView)); err != nil || strings.Count(string(v2), `<section class="step`) != 5 ||
		strings.Count(string(v2), "data:image/jpeg;base64,") != 5 {
		t.Errorf("pab grade --out: view.html %d bytes, %v", len(v2), err)
	}

	// pab view prints the path
	if o, e, c := runPab(t, "view", run); c != 0 || strings.TrimSpace(o) != viewPath {
		t.Errorf("pab view: exit %d %q %q, want %s", c, o, e, viewPath)
	}
	if _, e, c := runPab(t, "view", t.TempDir()); c == 0 || !strings.Contains(e, "view.html") {
		t.Errorf("pab view on a directory without a view: exit %d %q", c, e)
	}

	// opened in headless Chromium whose proxy is a closed port: nothing fails to load
	ctx := replayChrome(t, "127.0.0.1:1")
	var mu sync.Mutex
	var failed, requested []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventLoadingFailed:
			failed = append(failed, e.ErrorText)
		case *network.EventRequestWillBeSent:
			requested = append(requested, textcut.Fit(e.Request.URL, 80, "…"))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+viewPath)); err != nil {
		t.Fatal(err)
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.images].filter(i => i.complete && i.naturalWidth > 0).length`))
	if err != nil || loaded != 5 {
		t.Errorf("view in Chromium: %d of 5 images decoded (%v)", loaded, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("view in Chromium: failed loads %q of requests %q", failed, requested)
	}
	t.Logf("view in Chromium: requests %q", requested)
}

// TestRunViewGuard (issue 30): a pab run --guard run of apply-greenhouse-axon by the
// scripted agent — type the email, press "Submit application" (refused in
// fill_and_review), ready_for_review — has a view whose submit step is marked refused with
// the guard's reason, and the typed value appears nowhere in view.html or steps.jsonl.
func TestRunViewGuard(t *testing.T) {
	requireBrowserStack(t)
	agentBin := filepath.Join(t.TempDir(), "stepagent")
	if out, err := exec.Command("go", "build", "-o", agentBin, "./testdata/stepagent").CombinedOutput(); err != nil {
		t.Fatalf("build stepagent: %v\n%s", err, out)
	}
	const typed = "jane.doe@example.com"
	t.Setenv("STEPAGENT_PLAN", strings.Join([]string{
		`browser_navigate {"url":"https://job-boards.greenhouse.io/axon/jobs/6641960003"}`,
		`browser_type {"target":"$ref:textbox:Email","element":"Email","text":"` + typed + `","source_quote":"Email: ` + typed + `"}`,
		`browser_click {"target":"$ref:button:Submit application","element":"Submit application"}`,
		`ready_for_review {"summary":"email filled"}`,
	}, "\n"))
	t.Setenv("STEPAGENT_ANSWER", "ready for review")
	t.Setenv("PAB_PLAYWRIGHT_MCP", "")
	out := filepath.Join(t.TempDir(), "batch")
	stdout, stderr, code := runPabDir(t, repoRoot, "run", "--out", out, "--guard", filepath.Join(repoRoot, "tasks/apply-greenhouse-axon/application.yaml"),
		"--proxy-env=false", "--timeout", "3m", "--agent", agentBin, "--judge", "cli", "--judge-cmd", exampleJudge, "apply-greenhouse-axon")
	if code != 0 {
		t.Fatalf("pab run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	run := filepath.Join(out, "apply-greenhouse-axon", "1")
	steps, err := batch.ReadSteps(filepath.Join(run, batch.FileSteps))
	if err != nil {
		e, _ := os.ReadFile(filepath.Join(run, batch.FileStderr))
		t.Fatalf("steps: %v\n%s", err, e)
	}
	var tools []string
	for _, st := range steps {
		tools = append(tools, st.Tool)
		if st.Screenshot != "" || !strings.Contains(st.ShotNote, "pab guard owns") {
			t.Errorf("guard step %d: screenshot %q note %q", st.N, st.Screenshot, st.ShotNote)
		}
	}
	if strings.Join(tools, " ") != "browser_navigate browser_snapshot browser_type browser_snapshot browser_click ready_for_review" {
		e, _ := os.ReadFile(filepath.Join(run, batch.FileStderr))
		t.Fatalf("steps %v\n%s", tools, e)
	}
	for _, name := range []string{batch.FileSteps, batch.FileView} {
		data, err := os.ReadFile(filepath.Join(run, name))
		if err != nil {
			t.Fatal(err)
		}
		low := strings.ToLower(string(data))
		for _, form := range []string{typed, "jane.doe%40example.com", "jane.doe&#64;example.com"} {
			if i := strings.Index(low, form); i >= 0 {
				t.Errorf("%s holds the typed value (%s): …%s…", name, form, low[max(0, i-300):min(len(low), i+100)])
			}
		}
	}
	view, _ := os.ReadFile(filepath.Join(run, batch.FileView))
	doc, err := html.Parse(bytes.NewReader(view))
	if err != nil {
		t.Fatal(err)
	}
	// the click step: marked refused, with a refused policy.decision row giving the reason
	var sections []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "section" {
			sections = append(sections, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if len(sections) != 6 {
		t.Fatalf("view.html has %d steps, want 6", len(sections))
	}
	var b bytes.Buffer
	html.Render(&b, sections[4])
	click := b.String()
	if !strings.Contains(click, `<span class="mark">refused</span>`) || !strings.Contains(click, `class="refused"`) ||
		!strings.Contains(click, "policy.decision") || !strings.Contains(click, "reason") {
		t.Errorf("the submit step is not shown refused with its reason:\n%s", click)
	}
}
