package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// goTestJSON runs go test -json on the fixture package testdata/sample with env added and
// returns its stream.
func goTestJSON(t *testing.T, env ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", "test", "-json", "-count=1", "./testdata/sample")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out
}

const table = `# Testing

## Allowed skips

| package | test | why the environment cannot run it |
|---|---|---|
| ` + "`tools/testreport/testdata/sample`" + ` | ` + "`TestSkipsWithReason`" + ` | no frobnicator in CI |
| tools/testreport/testdata/sample | TestSkipsSilently | listed, but it gives no reason |
| tools/testreport/testdata/sample | TestSub/* | every subtest |

## Other
| a | b |
`

// TestReportRealStream: on a real go test -json stream, a failed test's output is printed
// with its name, a passing test's is not, and the summary lists every skip with its reason;
// under -ci a skip needs a row of the table and a reason, so the silent skip fails the run
// even though it is listed, and an unlisted skip fails it too.
func TestReportRealStream(t *testing.T) {
	const pkg = "github.com/pab-dev/pab/tools/testreport/testdata/sample"
	allowed, err := ParseAllowed("docs/testing.md", table)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := NewReport(&out)
	if err := r.Read(bytes.NewReader(goTestJSON(t, "SAMPLE_FAIL=1"))); err != nil {
		t.Fatal(err)
	}
	if r.Summary(false, allowed) {
		t.Error("a run with a failed test passed")
	}
	s := out.String()
	for _, want := range []string{
		"--- FAIL: TestFails (" + pkg,
		"the failure's own words",
		"FAIL\t" + pkg,
		"testreport: 1 packages, 3 tests passed, 1 failed, 3 skipped",
		"  SKIP " + pkg + " TestSkipsSilently: (no reason given)\n",
		"  SKIP " + pkg + " TestSkipsWithReason: sample_test.go:18: no frobnicator on this machine\n",
		"  SKIP " + pkg + " TestSub/skipped: sample_test.go:24: sub reason\n",
		"testreport: FAIL " + pkg + " TestFails\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "a passing test's log") {
		t.Errorf("a passing test's output was printed:\n%s", s)
	}

	stream := goTestJSON(t)
	for _, c := range []struct {
		ci      bool
		table   string
		pass    bool
		refused int
	}{
		{ci: false, table: table, pass: true},
		{ci: true, table: table, pass: false, refused: 1}, // the silent skip
		{ci: true, table: "", pass: false, refused: 3},    // nothing listed
	} {
		allowed, err := ParseAllowed("docs/testing.md", c.table)
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		r := NewReport(&out)
		if err := r.Read(bytes.NewReader(stream)); err != nil {
			t.Fatal(err)
		}
		if got := r.Summary(c.ci, allowed); got != c.pass {
			t.Errorf("ci=%v table=%d bytes: passed %v, want %v:\n%s", c.ci, len(c.table), got, c.pass, out.String())
		}
		if n := strings.Count(out.String(), "[not allowed under CI=true]"); n != c.refused {
			t.Errorf("ci=%v table=%d bytes: %d skips refused, want %d:\n%s", c.ci, len(c.table), n, c.refused, out.String())
		}
	}
	if !strings.Contains(out.String(), "3 skipped tests are failures under CI=true") {
		t.Errorf("no closing line for the refused skips:\n%s", out.String())
	}
}

// TestReportUnfinishedAndBuild: a test that starts and never ends (a timeout's panic) and a
// build failure fail the run; lines that are not events are printed as they are.
func TestReportUnfinishedAndBuild(t *testing.T) {
	stream := `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/x.go:1:1: expected 'package'\n"}
{"ImportPath":"q [q.test]","Action":"build-fail"}
`
	var out bytes.Buffer
	r := NewReport(&out)
	if err := r.Read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	if r.Summary(false, nil) {
		t.Error("passed")
	}
	for _, want := range []string{"go: downloading example.com/x v1.0.0\n", "panic: test timed out after 1s\n",
		"q/x.go:1:1: expected 'package'\n", "testreport: p TestHang started but never ended",
		"testreport: q [q.test] failed to build", "testreport: FAIL package p"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestParseAllowedErrors: rows without a reason, with the wrong number of cells or without a
// test name are refused with the file and line.
func TestParseAllowedErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"## Allowed skips\n| p | TestX |\n", "f.md:2: a row of the allowed skips has 2 cells"},
		{"## Allowed skips\n|package|test|why|\n|---|---|---|\n| p | TestX | |\n", "f.md:4: " + "p TestX: say why"},
		{"## Allowed skips\n| p | x | y |\n", `f.md:2: test "x"`},
	} {
		if _, err := ParseAllowed("f.md", c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseAllowed(%q) = %v; want %q", c.text, err, c.want)
		}
	}
	a, err := ParseAllowed("f.md", "| p | TestY | outside the section |\n## Allowed skips\n| internal/x | TestX | why |\n")
	if err != nil {
		t.Fatal(err)
	}
	if why, ok := a.Allows(modulePath+"/internal/x", "TestX"); !ok || why != "why" {
		t.Errorf("Allows(internal/x TestX) = %q, %v", why, ok)
	}
	if _, ok := a.Allows("p", "TestY"); ok {
		t.Error("a row outside the section counted")
	}
	if _, ok := a.Allows(modulePath+"/internal/x", "TestX/sub"); ok {
		t.Error("TestX allows its subtests without /*")
	}
}

// FuzzParseAllowed: any text is parsed or refused without a panic, and every row parsed has
// a test name and a reason.
func FuzzParseAllowed(f *testing.F) {
	f.Add(table)
	f.Add("## Allowed skips\n| a | TestB | c |\n|||\n")
	f.Fuzz(func(t *testing.T, text string) {
		a, err := ParseAllowed("f.md", text)
		if err != nil {
			return
		}
		for _, r := range a.rows {
			if r.test == "" || r.why == "" || r.pkg == "" {
				t.Errorf("row %+v", r)
			}
		}
	})
}

// FuzzReport: any stream is read and summarized without a panic.
func FuzzReport(f *testing.F) {
	f.Add(`{"Action":"run","Package":"p","Test":"T"}` + "\n" + `{"Action":"skip","Package":"p","Test":"T"}` + "\n")
	f.Add("not json\n{\"Action\":\"fail\"}\n{")
	f.Fuzz(func(t *testing.T, stream string) {
		var out bytes.Buffer
		r := NewReport(&out)
		if err := r.Read(strings.NewReader(stream)); err != nil {
			t.Fatal(err)
		}
		r.Summary(true, nil)
	})
}

// TestRepoAllowedSkips: docs/testing.md's table parses and allows internal/mitm's helper
// process, the one skip CI has (so a broken table fails here, not at the end of CI).
func TestRepoAllowedSkips(t *testing.T) {
	data, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAllowed("docs/testing.md", string(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Allows(modulePath+"/internal/mitm", "TestHelperShell"); !ok || len(a.rows) != 1 {
		t.Errorf("docs/testing.md allows %+v; want internal/mitm TestHelperShell alone", a.rows)
	}
}
