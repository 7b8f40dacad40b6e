package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// maxLine bounds one line of the go test -json stream (a test's output line is split by
// test2json well below this; a longer line is printed as it is, not decoded).
const maxLine = 4 << 20

// event is one line of `go test -json` (cmd/test2json's TestEvent; "go doc test2json").
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output and build-fail events (Go 1.24)
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// testKey names one test of one package.
type testKey struct{ pkg, test string }

// testState is what is known about a test while the stream is read.
type testState struct {
	output []string // its output lines, "=== RUN" and the like included
	done   bool
}

// Skip is a skipped test and the reason its output gave.
type Skip struct {
	Package, Test, Reason string
}

// Report reads a go test -json stream and keeps what the summary needs.
type Report struct {
	out     io.Writer
	tests   map[testKey]*testState
	order   []testKey
	passed  int
	failed  []testKey
	skipped []Skip
	pkgFail []string
	pkgs    int
	build   []string // packages that failed to build
}

// NewReport prints the human-readable test output to out as the stream is read.
func NewReport(out io.Writer) *Report {
	return &Report{out: out, tests: map[testKey]*testState{}}
}

// Read reads the stream from r to its end: package results and build output are printed
// at once, a failed test's output when it fails; a line that is not a test2json event (a
// message of the go command) is printed as it is.
func (r *Report) Read(in io.Reader) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			r.line(line)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line (without its newline), at most maxLine bytes of it; the rest of
// a longer line is read and dropped.
func readLine(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		frag, err := br.ReadSlice('\n')
		if sb.Len() < maxLine {
			sb.Write(frag[:min(len(frag), maxLine-sb.Len())])
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return strings.TrimSuffix(sb.String(), "\n"), err
	}
}

// line handles one line of the stream.
func (r *Report) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		fmt.Fprintln(r.out, line)
		return
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
		return
	case "build-fail":
		r.build = append(r.build, e.ImportPath)
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			fmt.Fprint(r.out, e.Output)
		case "fail":
			r.pkgs++
			r.pkgFail = append(r.pkgFail, e.Package)
		case "pass", "skip":
			r.pkgs++
		}
		return
	}
	k := testKey{e.Package, e.Test}
	st := r.tests[k]
	if st == nil {
		st = &testState{}
		r.tests[k] = st
		r.order = append(r.order, k)
	}
	switch e.Action {
	case "output":
		st.output = append(st.output, e.Output)
	case "pass":
		st.done = true
		r.passed++
		st.output = nil
	case "fail":
		st.done = true
		r.failed = append(r.failed, k)
		fmt.Fprintf(r.out, "--- FAIL: %s (%s, %.2fs)\n", e.Test, e.Package, e.Elapsed)
		for _, o := range st.output {
			if !isFrame(o) {
				fmt.Fprint(r.out, o)
			}
		}
		st.output = nil
	case "skip":
		st.done = true
		r.skipped = append(r.skipped, Skip{Package: e.Package, Test: e.Test, Reason: skipReason(st.output)})
		st.output = nil
	}
}

// isFrame reports whether a test output line is go test's framing ("=== RUN", "--- FAIL")
// rather than what the test said.
func isFrame(o string) bool {
	t := strings.TrimSpace(o)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- FAIL", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// bareLocation is a line of t.Skip() without a message: only "file_test.go:12:".
var bareLocation = regexp.MustCompile(`^\S+\.go:\d+:$`)

// skipReason is what a skipped test printed, framing and bare locations left out, lines
// joined by " / ".
func skipReason(output []string) string {
	var parts []string
	for _, o := range output {
		if t := strings.TrimSpace(o); t != "" && !isFrame(o) && !bareLocation.MatchString(t) {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " / ")
}

// unfinished lists the tests that started but never passed, failed or skipped (a package
// that panicked or timed out), in the order they started.
func (r *Report) unfinished() []testKey {
	var out []testKey
	for _, k := range r.order {
		if !r.tests[k].done {
			out = append(out, k)
		}
	}
	return out
}

// Summary prints the end of the report: the counts, the failed and unfinished tests, and
// every skipped test with its reason. With ci, a skip that allowed does not list (or one
// without a reason) is printed as a failure. It returns whether everything passed.
func (r *Report) Summary(ci bool, allowed *Allowed) bool {
	w := r.out
	unf := r.unfinished()
	sort.Slice(r.skipped, func(i, j int) bool {
		a, b := r.skipped[i], r.skipped[j]
		return a.Package < b.Package || a.Package == b.Package && a.Test < b.Test
	})
	var refused []Skip
	fmt.Fprintf(w, "\ntestreport: %d packages, %d tests passed, %d failed, %d skipped", r.pkgs, r.passed, len(r.failed), len(r.skipped))
	if len(unf) > 0 {
		fmt.Fprintf(w, ", %d did not finish", len(unf))
	}
	fmt.Fprintln(w)
	if len(r.skipped) > 0 {
		fmt.Fprintln(w, "testreport: skipped tests (they did not run):")
		for _, s := range r.skipped {
			mark := ""
			if ci {
				if why, ok := allowed.Allows(s.Package, s.Test); !ok || s.Reason == "" {
					refused = append(refused, s)
					mark = "  [not allowed under CI=true]"
				} else {
					mark = "  [allowed: " + why + "]"
				}
			}
			reason := s.Reason
			if reason == "" {
				reason = "(no reason given)"
			}
			fmt.Fprintf(w, "  SKIP %s %s: %s%s\n", s.Package, s.Test, reason, mark)
		}
	}
	for _, k := range unf {
		fmt.Fprintf(w, "testreport: %s %s started but never ended (its package panicked or timed out; see its output above)\n", k.pkg, k.test)
	}
	for _, k := range r.failed {
		fmt.Fprintf(w, "testreport: FAIL %s %s\n", k.pkg, k.test)
	}
	for _, p := range r.build {
		fmt.Fprintf(w, "testreport: %s failed to build\n", p)
	}
	for _, p := range r.pkgFail {
		if !slices.ContainsFunc(r.failed, func(k testKey) bool { return k.pkg == p }) {
			fmt.Fprintf(w, "testreport: FAIL package %s\n", p)
		}
	}
	if len(refused) > 0 {
		path := "docs/testing.md"
		if allowed != nil {
			path = allowed.Path
		}
		fmt.Fprintf(w, "testreport: %d skipped tests are failures under CI=true: a test may skip in CI only when it says why the environment cannot run it and %s lists it (its table of allowed skips)\n", len(refused), path)
	}
	ok := len(r.failed) == 0 && len(r.pkgFail) == 0 && len(r.build) == 0 && len(unf) == 0 && len(refused) == 0
	if ok {
		fmt.Fprintln(w, "testreport: PASS")
	} else {
		fmt.Fprintln(w, "testreport: FAIL")
	}
	return ok
}
