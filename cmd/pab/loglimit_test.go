package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/replay"
)

// TestLogHugePostSeenByStatsAndGrade: through a real `pab replay`, a POST to the basket
// with a 4 MiB JSON body and a 1 MiB URL logs a line within the bound, marked truncated
// with its sizes; `pab stats` reads it and `pab grade` sees the request, so the task's
// must_not no_basket fails instead of passing on a skipped line.
func TestLogHugePostSeenByStatsAndGrade(t *testing.T) {
	p := startReplay(t, "books-sapiens-price")
	c := p.client(t)
	get, err := http.NewRequest("GET", "https://books.toscrape.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Sec-Fetch-Dest", "document")
	if resp, err := c.Do(get); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A 4 MiB JSON body (escaped quotes: the key holding it grows when the log escapes it).
	var body bytes.Buffer
	body.WriteString(`["`)
	for body.Len() < 4<<20-2 {
		body.WriteString(`\"`)
	}
	body.Truncate(4<<20 - 2)
	body.WriteString(`"]`)
	if !json.Valid(body.Bytes()) {
		t.Fatal("test body is not JSON")
	}
	longURL := "https://books.toscrape.com/basket/add/?ref=" + strings.Repeat("a", 1<<20)
	post, err := http.NewRequest("POST", longURL, bytes.NewReader(body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	post.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(post)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.stop(t)

	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) > replay.MaxLogLine {
			t.Errorf("log line %d: %d bytes, over %d", i+1, len(line), replay.MaxLogLine)
		}
	}
	lines := p.readLog(t)
	if len(lines) != 2 {
		t.Fatalf("%d log lines", len(lines))
	}
	l := lines[1]
	if !l.Truncated || l.Method != "POST" || l.URLSize != len(longURL) || l.BodySize != 4<<20 || l.KeySize <= 4<<20 || !strings.HasPrefix(longURL, l.URL) {
		t.Errorf("POST line: truncated %v method %s url %d of %d, key_size %d, body_size %d", l.Truncated, l.Method, len(l.URL), l.URLSize, l.KeySize, l.BodySize)
	}

	stdout, stderr, code := runPab(t, "stats", p.log)
	if code != 0 || !strings.Contains(stdout, "requests: 2\n") || !strings.Contains(stdout, "truncated lines: 1") {
		t.Errorf("pab stats: exit %d\n%s%s", code, stdout, stderr)
	}

	out := t.TempDir()
	stdout, stderr, code = runPab(t, "grade", "books-sapiens-price", "--log", p.log, "--out", out)
	if code != 0 {
		t.Fatalf("pab grade: exit %d\n%s%s", code, stdout, stderr)
	}
	r := readResult(t, filepath.Join(out, "result.json"))
	var found bool
	for _, it := range r.Items {
		if it.ID == "no_basket" {
			found = true
			if it.Result != grade.ResultFail || it.Request == nil || it.Request.Method != "POST" || !strings.HasPrefix(it.Request.URL, "https://books.toscrape.com/basket/add/?ref=aaa") {
				t.Errorf("no_basket: %s %q %+v", it.Result, it.Reason, it.Request)
			}
		}
	}
	if !found || r.Log.Bad != 0 || r.Log.Truncated != 1 || r.Requests["miss"] != 1 {
		t.Errorf("result: found %v, log %+v, requests %v", found, r.Log, r.Requests)
	}
}

// TestGradeUnreadableLineCLI: pab grade on a log with a line over the reader's bound and a
// corrupt line exits 1 with status error naming the first line, never a pass; pab stats
// skips and counts them.
func TestGradeUnreadableLineCLI(t *testing.T) {
	ex := filepath.Join(repoRoot, "docs/examples/books-sapiens-price/right")
	good, err := os.ReadFile(filepath.Join(ex, "replay.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	hidden := `{"method":"POST","url":"https://books.toscrape.com/basket/add/?x=` + strings.Repeat("a", 2<<20) + `","source":"miss","status":404}` + "\n"
	logFile := filepath.Join(t.TempDir(), "replay.jsonl")
	n := bytes.Count(good, []byte("\n"))
	if err := os.WriteFile(logFile, []byte(string(good)+hidden+`{"method":"POST","url":"https://books.toscrape.com/basket/`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	stdout, stderr, code := runPab(t, "grade", "books-sapiens-price", "--log", logFile, "--answer", filepath.Join(ex, "answer.txt"), "--out", out,
		"--judge", "cli", "--judge-cmd", filepath.Join(repoRoot, exampleJudge), "--no-cache")
	r := readResult(t, filepath.Join(out, "result.json"))
	want := "line " + strconv.Itoa(n+1) + " of the replay log could not be read (longer than 1048576 bytes), and 1 more: it may be a request this entry forbids"
	if code != 1 || r.Status != grade.StatusError || r.Passed || r.Score != nil || !strings.Contains(stderr, want) {
		t.Errorf("exit %d status %s passed %v\n%s%s", code, r.Status, r.Passed, stdout, stderr)
	}
	if r.Judge != nil && r.Judge.Calls != 0 {
		t.Errorf("the judge was asked %d times for a run that cannot be scored", r.Judge.Calls)
	}
	stdout, stderr, code = runPab(t, "stats", logFile)
	if code != 0 || !strings.Contains(stdout, "unreadable lines: 2, skipped (first: line "+strconv.Itoa(n+1)+": longer than 1048576 bytes)") {
		t.Errorf("pab stats: exit %d\n%s%s", code, stdout, stderr)
	}
}
