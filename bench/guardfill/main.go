// Command guardfill times one normal fill-to-review run through `pab guard`: an MCP client
// (stdio) plays the agent on the Axon form of tasks/apply-greenhouse-axon, against a
// `pab replay apply-greenhouse-axon` it starts itself (one replay for all its runs), as the
// grade test does (cmd/pab/guard_grade_test.go): navigate to the job page, fill every
// grounded field (a browser_snapshot before each browser_type, to find the field's ref),
// ready_for_review, close. A run's wall time is from starting `pab guard` to its exit; each
// run must end awaiting_review with every field filled, or the program exits 1.
//
//	go run ./bench/guardfill -pab /tmp/pab -repo . -runs 5 [-uploads] [-keep DIR]
//
// It prints `run N: X.XXX s` per run and then one JSON object (every call's time, the
// median). With -keep each run's trace, result and guard stderr are kept in DIR/run-N.
// bench/guardfill.sh runs it against two pab builds, interleaved.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	taskID  = "apply-greenhouse-axon"
	axonURL = "https://job-boards.greenhouse.io/axon/jobs/6641960003"
)

// fill is one grounded answer: the field (role and label prefix in the snapshot), the value
// typed and the owner's words quoted. The same as axonFills in cmd/pab/guard_grade_test.go.
type fill struct{ role, label, text, quote string }

var axonFills = []fill{
	{"textbox", "First Name", "Jane", "Jane Doe"},
	{"textbox", "Last Name", "Doe", "Jane Doe"},
	{"textbox", "Email", "jane.doe@example.com", "Email: jane.doe@example.com"},
	{"textbox", "Phone", "+1 555 0100", "Phone: +1 555 0100"},
	{"textbox", "LinkedIn Profile", "https://linkedin.example.com/in/jane-doe-example", "LinkedIn: https://linkedin.example.com/in/jane-doe-example"},
	{"textbox", "Website", "https://jane-doe.example.com", "Website: https://jane-doe.example.com"},
	{"textbox", "Where are you currently located?", "London, England, United Kingdom", "Location: London, England, United Kingdom"},
	{"combobox", "Are you legally authorized", "Yes", "Are you legally authorized to work in the United Kingdom for any UK employer now and in the future? Yes"},
	{"combobox", "Will you now or in the future require sponsorship", "No", "Will you now or in the future require sponsorship for employment in the United Kingdom? No"},
	{"combobox", "Can you provide verification", "Yes", "Can you provide verification of both your identity and authorization to work in the United Kingdom? Yes"},
	{"combobox", "Are you at least 18 years of age?", "Yes", "Are you at least 18 years of age? Yes"},
	{"combobox", "** Do you have any contractual obligations", "No", "Do you have any contractual obligations that would impact your ability to join? No"},
	{"textbox", "What city do you currently reside in?", "London", "City: London"},
}

// callTimeout bounds one tool call (a cold Chromium start may be in the first one).
const callTimeout = 120 * time.Second

// step is one timed part of a run: "start" (spawn and MCP initialize), a tool call
// (with the field for browser_type and its browser_snapshot), or "close" (stdin closed to
// the guard's exit).
type step struct {
	Name    string  `json:"name"`
	Field   string  `json:"field,omitempty"`
	Seconds float64 `json:"s"`
}

type runReport struct {
	Run     int     `json:"run"`
	WallS   float64 `json:"wall_s"`
	Outcome string  `json:"outcome"`
	Filled  int     `json:"filled"`
	Steps   []step  `json:"steps"`
	// Totals sums Steps by name (all browser_type calls, all snapshots, ...).
	Totals map[string]float64 `json:"totals"`
}

type report struct {
	Pab     string      `json:"pab"`
	Repo    string      `json:"repo"`
	Task    string      `json:"task"`
	Uploads bool        `json:"uploads"`
	Runs    []runReport `json:"runs"`
	MedianS float64     `json:"median_s"`
	MinS    float64     `json:"min_s"`
	MaxS    float64     `json:"max_s"`
}

func main() {
	pab := flag.String("pab", "", "the pab binary (required)")
	repo := flag.String("repo", ".", "the pab repository (tasks/, tools/playwright-mcp), passed as --repo")
	runs := flag.Int("runs", 1, "how many runs")
	uploads := flag.Bool("uploads", false, "also attach the resume and cover letter before ready_for_review (as the grade test's good run)")
	keep := flag.String("keep", "", "keep each run's trace.jsonl, result.json and guard.stderr in DIR/run-N")
	jsonOut := flag.String("json", "", "also write the JSON report to this file")
	summary := flag.Bool("summary", false, "instead of running: compare the JSON reports of LABEL=DIR arguments (each DIR's *.json; the first LABEL is the base)")
	flag.Parse()
	if *summary {
		if err := summarize(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "guardfill:", err)
			os.Exit(1)
		}
		return
	}
	if *pab == "" || *runs < 1 || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: guardfill -pab PATH [-repo DIR] [-runs N] [-uploads] [-keep DIR] [-json FILE]")
		os.Exit(2)
	}
	if err := run(*pab, *repo, *runs, *uploads, *keep, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "guardfill:", err)
		os.Exit(1)
	}
}

func run(pab, repo string, runs int, uploads bool, keep, jsonOut string) error {
	var err error
	if pab, err = filepath.Abs(pab); err != nil {
		return err
	}
	if repo, err = filepath.Abs(repo); err != nil {
		return err
	}
	app := filepath.Join(repo, "tasks", taskID, "application.yaml")
	if _, err := os.Stat(app); err != nil {
		return fmt.Errorf("no %s: pass -repo", app)
	}
	tmp, err := os.MkdirTemp("", "guardfill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	rp, err := startReplay(pab, repo, tmp)
	if err != nil {
		return err
	}
	defer rp.stop()

	rep := report{Pab: pab, Repo: repo, Task: taskID, Uploads: uploads}
	for i := 1; i <= runs; i++ {
		dir := filepath.Join(tmp, fmt.Sprintf("run-%d", i))
		if keep != "" {
			dir = filepath.Join(keep, fmt.Sprintf("run-%d", i))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		rr, err := oneRun(pab, repo, app, rp.addr, dir, uploads)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		rr.Run = i
		fmt.Printf("run %d: %.3f s\n", i, rr.WallS)
		rep.Runs = append(rep.Runs, rr)
	}
	walls := make([]float64, len(rep.Runs))
	for i, r := range rep.Runs {
		walls[i] = r.WallS
	}
	rep.MedianS = median(walls)
	rep.MinS, rep.MaxS = slices.Min(walls), slices.Max(walls)
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if jsonOut != "" {
		return os.WriteFile(jsonOut, append(out, '\n'), 0o644)
	}
	return nil
}

// pabCmd is a pab command against repo; PAB_CACHE comes from the environment (the script
// points it at a temporary directory), PAB_REPO is cleared so that --repo decides.
func pabCmd(pab, repo string, args ...string) *exec.Cmd {
	cmd := exec.Command(pab, append([]string{"--repo", repo}, args...)...)
	cmd.Env = append(os.Environ(), "PAB_REPO=")
	return cmd
}

// replayProc is a running `pab replay`.
type replayProc struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

var listenLine = regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)`)

// startReplay starts `pab replay TASK --listen 127.0.0.1:0` and reads its address from
// stderr (as cmd/pab/e2e_test.go's startReplay does).
func startReplay(pab, repo, tmp string) (*replayProc, error) {
	p := &replayProc{done: make(chan error, 1)}
	p.cmd = pabCmd(pab, repo, "replay", taskID, "--listen", "127.0.0.1:0", "--log", filepath.Join(tmp, "replay.jsonl"))
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	var seen strings.Builder
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			if p.addr != "" {
				continue // drain
			}
			seen.WriteString(sc.Text() + "\n")
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				p.addr = m[1]
				close(found)
			}
		}
		io.Copy(io.Discard, errPipe)
		p.done <- p.cmd.Wait()
	}()
	select {
	case <-found:
		return p, nil
	case err := <-p.done:
		return nil, fmt.Errorf("pab replay %s exited (%v):\n%s", taskID, err, seen.String())
	case <-time.After(120 * time.Second):
		p.cmd.Process.Kill()
		return nil, fmt.Errorf("pab replay %s printed no address in 120 s", taskID)
	}
}

// stop ends the replay with SIGINT, as Ctrl-C would.
func (p *replayProc) stop() {
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// session is one `pab guard` with its MCP client and the run's timed steps.
type session struct {
	cs    *mcp.ClientSession
	steps []step
}

func (s *session) call(name, field string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	t0 := time.Now()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	s.steps = append(s.steps, step{Name: name, Field: field, Seconds: time.Since(t0).Seconds()})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return sb.String(), fmt.Errorf("%s %s refused: %.1000s", name, field, sb.String())
	}
	return sb.String(), nil
}

var refLine = regexp.MustCompile(`^\s*-\s+'?([a-z]+)(?: "((?:[^"\\]|\\.)*)")?[^\n]*?\[ref=([a-z0-9]+)\]`)

// find takes a browser_snapshot and returns the ref of the nth (0-based) element with role
// whose accessible name starts with name (cmd/pab/guard_apply_test.go's find).
func (s *session) find(role, name string, nth int) (string, error) {
	snap, err := s.call("browser_snapshot", name, nil)
	if err != nil {
		return "", err
	}
	i := 0
	for _, l := range strings.Split(snap, "\n") {
		m := refLine.FindStringSubmatch(l)
		if m == nil || m[1] != role || !strings.HasPrefix(strings.ReplaceAll(m[2], `\"`, `"`), name) {
			continue
		}
		if i == nth {
			return m[3], nil
		}
		i++
	}
	return "", fmt.Errorf("no %s %q (#%d) in the snapshot:\n%.4000s", role, name, nth, snap)
}

// oneRun plays one fill-to-review run through a new pab guard and returns its times.
func oneRun(pab, repo, app, proxy, dir string, uploads bool) (runReport, error) {
	var rr runReport
	tracePath, resultPath := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "result.json")
	os.Remove(tracePath)
	os.Remove(resultPath)
	// stderr to a file: cmd.Wait then returns when pab guard exits, not when the last
	// child holding a copy of the pipe does.
	stderrF, err := os.Create(filepath.Join(dir, "guard.stderr"))
	if err != nil {
		return rr, err
	}
	defer stderrF.Close()
	stderrOf := func() string {
		data, _ := os.ReadFile(stderrF.Name())
		if len(data) > 8000 {
			data = data[len(data)-8000:]
		}
		return string(data)
	}
	cmd := pabCmd(pab, repo, "guard", "--application", app, "--proxy", proxy,
		"--trace", tracePath, "--result", resultPath, "--control", "127.0.0.1:0")
	cmd.Stderr = stderrF

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "guardfill"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: cmd, TerminateDuration: 30 * time.Second}, nil)
	cancel()
	if err != nil {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		return rr, fmt.Errorf("connect to pab guard: %v\nstderr:\n%s", err, stderrOf())
	}
	s := &session{cs: cs, steps: []step{{Name: "start", Seconds: time.Since(start).Seconds()}}}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
	}()

	fail := func(err error) (runReport, error) {
		return rr, fmt.Errorf("%w\nguard stderr (tail):\n%s", err, stderrOf())
	}
	if _, err := s.call("browser_navigate", "", map[string]any{"url": axonURL}); err != nil {
		return fail(err)
	}
	for _, f := range axonFills {
		ref, err := s.find(f.role, f.label, 0)
		if err != nil {
			return fail(err)
		}
		if _, err := s.call("browser_type", f.label, map[string]any{"target": ref, "element": f.label, "text": f.text, "source_quote": f.quote}); err != nil {
			return fail(err)
		}
	}
	if uploads {
		// the resume and the cover letter, each through the second and fourth "Attach"
		for _, u := range []struct {
			kind string
			nth  int
		}{{"resume", 1}, {"cover_letter", 3}} {
			ref, err := s.find("button", "Attach", u.nth)
			if err != nil {
				return fail(err)
			}
			if _, err := s.call("browser_click", "Attach "+u.kind, map[string]any{"target": ref, "element": "Attach " + u.kind}); err != nil {
				return fail(err)
			}
			if _, err := s.call("upload_artifact", u.kind, map[string]any{"kind": u.kind}); err != nil {
				return fail(err)
			}
		}
	}
	if _, err := s.call("ready_for_review", "", map[string]any{"summary": "Every grounded field filled."}); err != nil {
		return fail(err)
	}

	t0 := time.Now()
	closeErr := cs.Close() // closes pab guard's stdin and waits for its exit
	closed = true
	end := time.Now()
	s.steps = append(s.steps, step{Name: "close", Seconds: end.Sub(t0).Seconds()})
	rr.WallS = end.Sub(start).Seconds()
	rr.Steps = s.steps
	rr.Totals = map[string]float64{}
	for _, st := range s.steps {
		rr.Totals[st.Name] += st.Seconds
	}
	if closeErr != nil || cmd.ProcessState == nil || !cmd.ProcessState.Exited() || cmd.ProcessState.ExitCode() != 0 {
		return fail(fmt.Errorf("pab guard did not exit 0 by itself when its stdin closed (%v, %v)", closeErr, cmd.ProcessState))
	}

	data, err := os.ReadFile(resultPath)
	if err != nil {
		return fail(fmt.Errorf("no result file: %w", err))
	}
	var res struct {
		Outcome string `json:"outcome"`
		Filled  int    `json:"filled"`
		Error   string `json:"error"`
		Block   string `json:"blockReason"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return fail(fmt.Errorf("result.json: %w", err))
	}
	rr.Outcome, rr.Filled = res.Outcome, res.Filled
	if res.Outcome != "awaiting_review" {
		return fail(fmt.Errorf("outcome %q (blockReason %q, error %q), want awaiting_review", res.Outcome, res.Block, res.Error))
	}
	if res.Filled != len(axonFills) {
		return fail(fmt.Errorf("filled %d fields, want %d", res.Filled, len(axonFills)))
	}
	if _, err := os.Stat(tracePath); errors.Is(err, os.ErrNotExist) {
		return fail(errors.New("no trace file"))
	}
	return rr, nil
}

// median of xs (not empty); the mean of the middle two for an even count.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize reads the reports of each LABEL=DIR (every DIR/*.json, one or more runs each)
// and prints each label's median wall time, the ratio of each later label to the first,
// and the median per run of each step's total (start, browser_navigate, all
// browser_snapshot calls, all browser_type calls, ready_for_review, close).
func summarize(args []string) error {
	if len(args) < 1 {
		return errors.New("-summary needs LABEL=DIR arguments")
	}
	type group struct {
		label string
		runs  []runReport
	}
	var groups []group
	for _, a := range args {
		label, dir, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q: want LABEL=DIR", a)
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return err
		}
		g := group{label: label}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			var r report
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			g.runs = append(g.runs, r.Runs...)
		}
		if len(g.runs) == 0 {
			return fmt.Errorf("%s: no runs in %s/*.json", label, dir)
		}
		groups = append(groups, g)
	}
	wallMedian := make([]float64, len(groups))
	for i, g := range groups {
		walls := make([]float64, len(g.runs))
		for j, r := range g.runs {
			walls[j] = r.WallS
		}
		wallMedian[i] = median(walls)
		fmt.Printf("%-6s median %.3f s  (min %.3f, max %.3f, %d runs)\n", g.label, wallMedian[i], slices.Min(walls), slices.Max(walls), len(walls))
	}
	for i := 1; i < len(groups); i++ {
		fmt.Printf("ratio %s/%s: %.3f\n", groups[i].label, groups[0].label, wallMedian[i]/wallMedian[0])
	}
	fmt.Printf("\nmedian per run of each step's total (s):\n%-20s", "step")
	for _, g := range groups {
		fmt.Printf(" %9s", g.label)
	}
	fmt.Println("  calls")
	for _, name := range []string{"start", "browser_navigate", "browser_snapshot", "browser_type", "browser_click", "upload_artifact", "ready_for_review", "close"} {
		calls := 0
		for _, st := range groups[0].runs[0].Steps {
			if st.Name == name {
				calls++
			}
		}
		if calls == 0 {
			continue
		}
		fmt.Printf("%-20s", name)
		for _, g := range groups {
			xs := make([]float64, len(g.runs))
			for j, r := range g.runs {
				xs[j] = r.Totals[name]
			}
			fmt.Printf(" %9.3f", median(xs))
		}
		fmt.Printf("  %d\n", calls)
	}
	return nil
}
