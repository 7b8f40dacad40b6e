package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// output is a buffer Run's goroutines write to (through lockedWriter) while the test reads
// it.
type output struct {
	lockedWriter
	b bytes.Buffer
}

func newOutput() *output {
	o := &output{}
	o.W = &o.b
	return o
}

func (o *output) String() string {
	var s string
	o.Locked(func() { s = o.b.String() })
	return s
}

// runFiles writes an application file into a temporary directory and returns RunOptions
// with the fake MCP server as the browser and the trace, result and token files there.
func runFiles(t *testing.T) (RunOptions, string) {
	t.Helper()
	dir := t.TempDir()
	app := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(app, []byte("id: run-test\nmode: fill_and_review\nsites: [a.test]\ngrounding:\n  profile: Jane Doe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return RunOptions{Application: app, BrowserMCP: fakeMCP(t), UnprotectedBrowser: true, Trace: filepath.Join(dir, "trace.jsonl"),
		Result: filepath.Join(dir, "result.json"), ControlTokenFile: filepath.Join(dir, "token")}, dir
}

// readResult reads the result envelope Run wrote.
func readResult(t *testing.T, path string) Result {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ValidateResult(data)
	if err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return r
}

// TestRunStdinClosed runs a session whose agent closes stdin at once: Run returns nil after
// printing the control API, the token (from $PAB_GUARD_CONTROL_TOKEN when set, which Run
// then removes from the environment), the child's command line and the MCP line; the token
// file holds the token (mode 0600), the result is blocked (incomplete), the trace starts
// with the run's note, and nothing is written to stdout.
func TestRunStdinClosed(t *testing.T) {
	for _, fromEnv := range []bool{false, true} {
		t.Run(fmt.Sprintf("fromEnv=%v", fromEnv), func(t *testing.T) {
			o, _ := runFiles(t)
			envTok := strings.Repeat("ab12", 10)
			if fromEnv {
				t.Setenv(ControlTokenEnv, envTok)
			}
			null, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			stdout, stderr := newOutput(), newOutput()
			o.Stdin, o.Stdout, o.Stderr = null, stdout, stderr
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := Run(ctx, o); err != nil {
				t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
			}
			tok, err := os.ReadFile(o.ControlTokenFile)
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := os.Stat(o.ControlTokenFile); st.Mode().Perm() != 0o600 {
				t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
			}
			token := strings.TrimSuffix(string(tok), "\n")
			tokenLine := "pab guard: control token " + regexp.QuoteMeta(token) + ` \(also in ` + regexp.QuoteMeta(o.ControlTokenFile) + `, mode 0600\)`
			if fromEnv {
				if token != envTok {
					t.Errorf("token file holds %q, want the one from $%s", tok, ControlTokenEnv)
				}
				if _, set := os.LookupEnv(ControlTokenEnv); set {
					t.Errorf("$%s is still set after Run", ControlTokenEnv)
				}
				tokenLine = `pab guard: control token from \$` + ControlTokenEnv + ` \(also in ` + regexp.QuoteMeta(o.ControlTokenFile) + `, mode 0600\)`
			} else if CheckControlToken(token) != nil || string(tok) != token+"\n" {
				t.Errorf("token file %q: want a token and a newline", tok)
			}
			want := regexp.MustCompile(`^pab guard: control http://127\.0\.0\.1:\d+ \(GET /local-apply/run, GET /local-apply/status, POST /local-apply/resume, POST /local-apply/cancel, POST /local-apply/close; header Authorization: Bearer TOKEN\)\n` +
				tokenLine + "\n" +
				"pab guard: PROTECTION OFF \\(--unprotected-browser\\)[^\n]*\n" +
				"pab guard: browser MCP server: " + regexp.QuoteMeta(o.BrowserMCP) + "\n" +
				`pab guard: run run-test \(fill_and_review\) serving MCP on stdio` + "\n$")
			if !want.MatchString(stderr.String()) {
				t.Errorf("stderr:\n%s\nwant to match:\n%s", stderr.String(), want)
			}
			if stdout.String() != "" {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if r := readResult(t, o.Result); r.Outcome != "blocked" || r.BlockReason != "incomplete" || r.RunID != "run-test" {
				t.Errorf("result %+v, want blocked/incomplete of run-test", r)
			}
			trace, err := os.ReadFile(o.Trace)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(trace), "\n")
			var e Event
			if err := json.Unmarshal([]byte(first), &e); err != nil || e.Type != "note" || e.Detail["status"] != "started" {
				t.Errorf("trace's first event %s (%v), want the note started", first, err)
			}
		})
	}
}

// TestRunOwnerCloses ends a session through the control API while the agent's stdin is
// still open: POST /local-apply/close makes Run return nil, with the result saying the owner
// closed the run.
func TestRunOwnerCloses(t *testing.T) {
	o, _ := runFiles(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	stdout, stderr := newOutput(), newOutput()
	o.Stdin, o.Stdout, o.Stderr = pr, stdout, stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	addr := regexp.MustCompile(`control http://(127\.0\.0\.1:\d+) `)
	var base string
	for base == "" {
		select {
		case err := <-done:
			t.Fatalf("Run ended early: %v\nstderr:\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if strings.Contains(stderr.String(), "serving MCP on stdio") {
			base = "http://" + addr.FindStringSubmatch(stderr.String())[1]
		}
	}
	tok, err := os.ReadFile(o.ControlTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+ControlClosePath, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", ControlClosePath, resp.Status)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("Run did not end after POST %s\nstderr:\n%s", ControlClosePath, stderr.String())
	}
	if r := readResult(t, o.Result); !strings.Contains(r.Summary, "The owner closed the run") {
		t.Errorf("result summary %q, want the owner's close", r.Summary)
	}
}

// TestRunChecksFirst gives Run bad options: each is refused with its one-line error before
// the browser MCP server is started (it would leave a mark).
func TestRunChecksFirst(t *testing.T) {
	o, dir := runFiles(t)
	marker := filepath.Join(dir, "started")
	o.BrowserMCP = "sh -c 'touch " + marker + "'"
	for _, tc := range []struct {
		set  func(o *RunOptions)
		want string
	}{
		{func(o *RunOptions) { o.Application = "" }, "guard: --application FILE is required"},
		{func(o *RunOptions) { o.Listen = "0.0.0.0:0" }, `guard: --listen: address "0.0.0.0:0": only a loopback address`},
		{func(o *RunOptions) { o.Proxy = "127.0.0.1" }, `guard: --proxy: "127.0.0.1": want host:port, e.g. 127.0.0.1:8899`},
		{func(o *RunOptions) { o.CDPEndpoint = "http://127.0.0.1:9222" }, "guard: give --cdp-endpoint or --browser-mcp, not both"},
		{func(o *RunOptions) { o.Result = filepath.Join(dir, "no", "r.json") }, "guard: --result " + filepath.Join(dir, "no", "r.json") + ": its directory does not exist"},
		{func(o *RunOptions) { o.BrowserMCP = "'unclosed" }, `guard: --browser-mcp: "'unclosed": unclosed '`},
	} {
		bad := o
		tc.set(&bad)
		bad.Stderr = newOutput()
		err := Run(context.Background(), bad)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Run: %v; want one line starting %q", err, tc.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the browser MCP server was started despite bad options")
	}
}

// TestFindPlaywrightMCP finds cli.js under the repository root given, and otherwise lists
// the places it tried.
func TestFindPlaywrightMCP(t *testing.T) {
	t.Setenv("PAB_PLAYWRIGHT_MCP", "")
	root := t.TempDir()
	cli := filepath.Join(root, PlaywrightMCPCLI)
	if err := os.MkdirAll(filepath.Dir(cli), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cli, []byte("//"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindPlaywrightMCP(root); err != nil || got != cli {
		t.Errorf("FindPlaywrightMCP(%s) = %q, %v; want %s", root, got, err, cli)
	}
	other := t.TempDir()
	_, err := FindPlaywrightMCP(other)
	if err == nil || !strings.Contains(err.Error(), "tried "+filepath.Join(other, PlaywrightMCPCLI)+", ") {
		t.Errorf("FindPlaywrightMCP(%s): %v; want the places tried", other, err)
	}
	t.Setenv("PAB_PLAYWRIGHT_MCP", root)
	if _, err := FindPlaywrightMCP(""); err == nil || err.Error() != "PAB_PLAYWRIGHT_MCP="+root+": not a file" {
		t.Errorf("PAB_PLAYWRIGHT_MCP a directory: %v", err)
	}
}
