package batch

// This file writes a run's view.html: each browser step with its screenshot, the replay
// log lines of its time window, the guard's decisions, then the answer and the graded
// items (docs/run.md "The run view").

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/replay"
)

// FileView is a run's step-by-step view.
const FileView = "view.html"

// Bounds of the view: the replay log lines and guard events read, and shown per step.
const (
	maxViewLog      = 64 << 20
	maxViewRequests = 200
)

type viewRequest struct {
	Time, Method, URL, Source, Entry, Type string
	Status                                 int
	Mark                                   bool
}

type viewEvent struct {
	Time, Type, Detail string
	Refused            bool
}

type viewStep struct {
	Step
	Image        template.URL
	Requests     []viewRequest
	More         int
	Events       []viewEvent
	Marks        []string
	ArgsText     string
	StartT, EndT time.Time
}

type viewData struct {
	Dir, Task string
	Steps     []*viewStep
	Result    *grade.Result
	Answer    string
	Cap       string
	Before    int // requests before the first step
}

// markedSources are the answers a step is marked for reading.
var markedSources = map[replay.Source]string{replay.SourceFuzzy: "fuzzy answer", replay.SourceSearch: "search answer",
	replay.SourceMiss: "miss", replay.SourceBlocked: "blocked"}

// WriteView writes dir/view.html from dir's steps.jsonl, replay.jsonl, guard trace and res
// (nil: read result.json). It does nothing and returns nil when dir has no steps.jsonl.
// Screenshots are inlined as data: URLs, so the file opens with no network and no other
// file.
func WriteView(dir string, res *grade.Result) error {
	return WriteViewFiles(ViewFiles{Steps: filepath.Join(dir, FileSteps), Log: filepath.Join(dir, FileLog),
		GuardTrace: filepath.Join(dir, grade.GuardTraceFile), Answer: filepath.Join(dir, FileAnswer),
		Result: filepath.Join(dir, FileResult), Out: dir}, res)
}

// ViewFiles are the files a view is made from, and the directory it is written to (Out,
// as view.html). Screenshot paths in Steps are relative to Steps' directory. Empty
// GuardTrace, Answer or Result: none.
type ViewFiles struct {
	Steps, Log, GuardTrace, Answer, Result, Out string
}

// WriteViewFiles writes f.Out/view.html as WriteView does, from the files f names (pab
// grade --out: a run graded alone). It does nothing and returns nil without f.Steps.
func WriteViewFiles(f ViewFiles, res *grade.Result) error {
	dir := filepath.Dir(f.Steps)
	steps, err := ReadSteps(f.Steps)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if res == nil && f.Result != "" {
		data, err := readBounded(f.Result, 16<<20)
		if err == nil {
			var r grade.Result
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("%s: %v", f.Result, err)
			}
			res = &r
		}
	}
	v := &viewData{Dir: f.Out, Result: res, Cap: fmt.Sprintf("at most %d screenshots per run, each JPEG ≤ %d KiB and ≤ %d px wide", MaxScreenshots, maxShotBytes>>10, maxShotWidth)}
	if res != nil {
		v.Task = res.Task
	}
	if a, err := readBounded(f.Answer, grade.MaxAnswerSize); f.Answer != "" && err == nil {
		v.Answer = textcut.Fit(string(a), 20000, "…")
	}
	for i := range steps {
		s := &viewStep{Step: steps[i]}
		s.StartT, _ = time.Parse(time.RFC3339Nano, steps[i].Start)
		s.EndT, _ = time.Parse(time.RFC3339Nano, steps[i].End)
		if len(s.Args) > 0 {
			s.ArgsText = string(s.Args)
		}
		if s.Screenshot != "" && filepath.IsLocal(filepath.FromSlash(s.Screenshot)) {
			if img, err := readBounded(filepath.Join(dir, filepath.FromSlash(s.Screenshot)), maxShotBytes); err == nil {
				s.Image = template.URL("data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(img))
			}
		}
		if s.IsError {
			s.Marks = append(s.Marks, "tool error")
		}
		if s.RPCError != "" {
			s.Marks = append(s.Marks, "no answer")
		}
		v.Steps = append(v.Steps, s)
	}
	if err := v.readLog(f.Log); err != nil {
		return err
	}
	if f.GuardTrace != "" {
		v.readGuard(f.GuardTrace)
	}
	var b bytes.Buffer
	if err := viewTmpl.Execute(&b, v); err != nil {
		return fmt.Errorf("render %s: %v", FileView, err)
	}
	return atomicfile.Write(filepath.Join(f.Out, FileView), b.Bytes(), 0o644)
}

// stepOf is the index of the step whose window [start, next step's start) holds t; -1
// before the first.
func (v *viewData) stepOf(t time.Time) int {
	k := -1
	for i, s := range v.Steps {
		if !t.Before(s.StartT) {
			k = i
		}
	}
	return k
}

func (v *viewData) readLog(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(&limitedReader{f, maxViewLog})
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l replay.LogLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Time == "" || l.Source == "" {
			continue // the header, or a bad line: grading reports those
		}
		t, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil {
			continue
		}
		k := v.stepOf(t)
		if k < 0 {
			v.Before++
			continue
		}
		s := v.Steps[k]
		mark, marked := markedSources[l.Source]
		if l.Source == replay.SourceBlocked && l.Type == "tracker" {
			marked = false // a tracker blocked by the rules is not the agent's doing
		}
		if marked && !contains(s.Marks, mark) {
			s.Marks = append(s.Marks, mark)
		}
		if len(s.Requests) >= maxViewRequests {
			s.More++
			continue
		}
		s.Requests = append(s.Requests, viewRequest{Time: l.Time, Method: l.Method, URL: textcut.Fit(l.URL, 300, "…"),
			Source: string(l.Source), Entry: l.Entry, Type: l.Type, Status: l.Status, Mark: marked})
	}
	return nil
}

// readGuard puts the guard trace's policy decisions and blocks into their steps.
func (v *viewData) readGuard(path string) {
	data, err := readBounded(path, maxViewLog)
	if err != nil {
		return
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var ev struct {
			At     string         `json:"at"`
			Type   string         `json:"type"`
			Detail map[string]any `json:"detail"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.Type == "" {
			continue
		}
		if ev.Type != "policy.decision" && ev.Type != "browser.blocked" && ev.Type != "run.paused" && !strings.HasPrefix(ev.Type, "submit.") {
			continue
		}
		ts := ev.At
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		k := v.stepOf(t)
		if k < 0 {
			continue
		}
		d, _ := json.Marshal(ev.Detail)
		refused := ev.Detail["decision"] == "refused" || ev.Type == "browser.blocked"
		s := v.Steps[k]
		if refused && !contains(s.Marks, "refused") {
			s.Marks = append(s.Marks, "refused")
		}
		if len(s.Events) < maxViewRequests {
			s.Events = append(s.Events, viewEvent{Time: ts, Type: ev.Type, Detail: textcut.Fit(string(d), 600, "…"), Refused: refused})
		}
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// limitedReader reads at most n bytes.
type limitedReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("over the size bound")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

var viewTmpl = template.Must(template.New("view").Funcs(template.FuncMap{"deref": func(p *float64) float64 { return *p }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>pab run view: {{.Task}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; max-width: 90em; }
.step { border: 1px solid #c9c9c9; border-radius: 4px; padding: .6em .9em; margin: 0 0 1em; }
.step.marked { border: 2px solid #c77700; }
.step h2 { font-size: 1.05em; margin: 0 0 .3em; }
.mark { display: inline-block; font-size: .8em; font-weight: 600; padding: 0 .4em; border-radius: 3px; margin-left: .3em; border: 1px solid #c77700; color: #6b3e00; background: #fff4e0; }
.shot img { max-width: 100%; border: 1px solid #ddd; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .4em; max-height: 18em; overflow: auto; font-size: .85em; }
table { border-collapse: collapse; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .2em .4em; text-align: left; vertical-align: top; }
tr.m td { background: #fff4e0; }
tr.refused td { background: #fbe0e0; }
.small { color: #555; font-size: .85em; }
.pass { color: #145214; } .fail { color: #7a1212; }
</style></head><body>
<h1>Run view: {{.Task}}</h1>
<p class="small">{{len .Steps}} steps. Screenshots: {{.Cap}}. Typed values are masked. {{if .Before}}{{.Before}} requests came before the first step.{{end}}</p>
{{range .Steps}}<section class="step{{if .Marks}} marked{{end}}" id="step-{{.N}}">
<h2>Step {{.N}}: <code>{{.Tool}}</code>{{range .Marks}}<span class="mark">{{.}}</span>{{end}}</h2>
<p class="small">{{.Start}} → {{.End}}{{if .IsError}} · the tool answered isError{{end}}</p>
{{if .ArgsText}}<pre class="args">{{.ArgsText}}</pre>{{end}}
{{if .RPCError}}<p class="fail">{{.RPCError}}</p>{{end}}
{{if .Excerpt}}<details><summary>answer excerpt</summary><pre>{{.Excerpt}}</pre></details>{{end}}
{{if .URL}}<p class="page">Page after the step: <span class="title">{{.Title}}</span> — <code class="url">{{.URL}}</code></p>{{end}}
{{if .Image}}<p class="shot"><img alt="screenshot after step {{.N}}" src="{{.Image}}"></p>{{else if .ShotNote}}<p class="small">{{.ShotNote}}</p>{{end}}
{{if .Events}}<table class="guard"><thead><tr><th>time</th><th>guard event</th><th>detail</th></tr></thead><tbody>
{{range .Events}}<tr{{if .Refused}} class="refused"{{end}}><td>{{.Time}}</td><td>{{.Type}}</td><td>{{.Detail}}</td></tr>
{{end}}</tbody></table>{{end}}
{{if .Requests}}<table class="requests"><thead><tr><th>time</th><th>method</th><th>url</th><th>type</th><th>status</th><th>source</th><th>entry</th></tr></thead><tbody>
{{range .Requests}}<tr{{if .Mark}} class="m"{{end}}><td>{{.Time}}</td><td>{{.Method}}</td><td>{{.URL}}</td><td>{{.Type}}</td><td>{{.Status}}</td><td class="source">{{.Source}}</td><td>{{.Entry}}</td></tr>
{{end}}</tbody></table>{{if .More}}<p class="small">and {{.More}} more requests in this step</p>{{end}}{{end}}
</section>
{{end}}
<h2>Final answer</h2>
<pre class="answer">{{.Answer}}</pre>
{{with .Result}}<h2>Grading: {{.Status}}{{if .Score}} — score {{printf "%.3g" (deref .Score)}}{{end}}</h2>
<table class="items"><thead><tr><th>item</th><th>kind</th><th>result</th><th>reason</th><th>expected</th><th>actual</th></tr></thead><tbody>
{{range .Items}}<tr><td>{{.ID}}</td><td>{{.Kind}}</td><td class="{{.Result}}">{{.Result}}</td><td>{{.Reason}}{{if .JudgeReason}} — {{.JudgeReason}}{{end}}{{with .Request}}<br><span class="small">{{.Method}} {{.URL}}</span>{{end}}</td><td>{{.Expected}}</td><td>{{.Actual}}</td></tr>
{{end}}</tbody></table>{{end}}
</body></html>
`))
