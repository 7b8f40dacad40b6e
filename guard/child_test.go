package guard

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// fakeMCP builds testdata/fakemcp once per test binary and returns its path.
func fakeMCP(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "guard-fakemcp-")
		if err != nil {
			fakeErr = err
			return
		}
		fakeBin = filepath.Join(dir, "fakemcp")
		out, err := exec.Command("go", "build", "-o", fakeBin, "./testdata/fakemcp").CombinedOutput()
		if err != nil {
			fakeErr = err
			fakeBin = string(out)
		}
	})
	if fakeErr != nil {
		t.Fatalf("build fakemcp: %v\n%s", fakeErr, fakeBin)
	}
	return fakeBin
}

// startFake starts the fake server with a stderr file under the test's temp dir.
func startFake(t *testing.T, opts ChildOptions, args ...string) *Child {
	t.Helper()
	if opts.Stderr == nil {
		f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		opts.Stderr = f
	}
	c, err := StartChild(context.Background(), append([]string{fakeMCP(t)}, args...), opts)
	if err != nil {
		t.Fatalf("StartChild: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func resultText(r *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}

func TestChildWorks(t *testing.T) {
	c := startFake(t, ChildOptions{})
	tools, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
	}
	if !names["echo"] || !names["exit"] || len(tools) != 7 {
		t.Fatalf("tools %v", names)
	}
	if v := c.session.InitializeResult().ProtocolVersion; v != BrowserProtocolVersion {
		t.Errorf("negotiated protocol %q, want %q", v, BrowserProtocolVersion)
	}
	res, err := c.CallTool(context.Background(), "echo", map[string]any{"url": "http://x.test/", "n": 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); got != `{"n":2,"url":"http://x.test/"}` {
		t.Errorf("echo = %q", got)
	}
	res, err = c.CallTool(context.Background(), "echo", nil)
	if err != nil || resultText(res) != `{}` {
		t.Errorf("echo nil args = %v, %v", res, err)
	}
	// a tool-level failure is a result, not an error
	res, err = c.CallTool(context.Background(), "fail", nil)
	if err != nil || !res.IsError || resultText(res) != "tool failed" {
		t.Errorf("fail = %+v, %v", res, err)
	}
	// an unknown tool is a JSON-RPC error; the connection stays usable
	if _, err := c.CallTool(context.Background(), "nope", nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown tool: %v", err)
	}
	res, err = c.CallTool(context.Background(), "big", map[string]any{"N": 3 << 20})
	if err != nil || len(resultText(res)) != 3<<20 {
		t.Errorf("big result: %v", err)
	}
	pid := c.Pid()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if alive(pid) {
		t.Errorf("server %d still running after Close", pid)
	}
	if _, err := c.CallTool(context.Background(), "echo", nil); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("call after Close: %v", err)
	}
}

func TestChildExitsMidCall(t *testing.T) {
	c := startFake(t, ChildOptions{CallTimeout: 30 * time.Second})
	start := time.Now()
	_, err := c.CallTool(context.Background(), "exit", nil)
	if err == nil {
		t.Fatal("call to a server that exits: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("error after %s; want it at once", d)
	}
	if !strings.Contains(err.Error(), "exited (exit status 3)") {
		t.Errorf("error %q does not give the exit status", err)
	}
	start = time.Now()
	if _, err := c.CallTool(context.Background(), "echo", nil); err == nil || time.Since(start) > time.Second {
		t.Errorf("later call: %v after %s", err, time.Since(start))
	}
	if _, err := c.ListTools(context.Background()); err == nil {
		t.Error("ListTools after exit: no error")
	}
}

func TestChildGarbageOutput(t *testing.T) {
	c := startFake(t, ChildOptions{CallTimeout: 30 * time.Second})
	start := time.Now()
	_, err := c.CallTool(context.Background(), "garbage", nil)
	if err == nil {
		t.Fatal("call answered with garbage: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("error after %s; want it at once", d)
	}
	if !strings.Contains(err.Error(), "connection broken") {
		t.Errorf("error %q does not say the connection broke", err)
	}
	start = time.Now()
	if _, err := c.CallTool(context.Background(), "echo", nil); err == nil || time.Since(start) > time.Second {
		t.Errorf("later call: %v after %s", err, time.Since(start))
	}
	pid := c.Pid()
	c.Close()
	if alive(pid) {
		t.Errorf("server %d (sleeping after garbage) still running after Close", pid)
	}
}

func TestChildCallTimeout(t *testing.T) {
	c := startFake(t, ChildOptions{CallTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := c.CallTool(context.Background(), "sleep", nil)
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("hanging call: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %s", d)
	}
	// the server is still fine
	if res, err := c.CallTool(context.Background(), "echo", map[string]any{"a": 1}); err != nil || resultText(res) != `{"a":1}` {
		t.Errorf("call after a timeout: %v %v", res, err)
	}
	// the caller's cancel is reported as such
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.CallTool(ctx, "sleep", nil); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled call: %v", err)
	}
}

func TestChildStartFailures(t *testing.T) {
	if _, err := StartChild(context.Background(), nil, ChildOptions{}); err == nil {
		t.Error("empty argv: no error")
	}
	if _, err := StartChild(context.Background(), []string{"/nonexistent/mcp-server"}, ChildOptions{}); err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("missing program: %v", err)
	}
	start := time.Now()
	_, err := StartChild(context.Background(), []string{fakeMCP(t), "exit-at-start"}, ChildOptions{Stderr: devNull(t)})
	if err == nil || !strings.Contains(err.Error(), "exit status 7") {
		t.Errorf("server exiting at start: %v", err)
	}
	_, err = StartChild(context.Background(), []string{fakeMCP(t), "garbage-at-start"}, ChildOptions{Stderr: devNull(t), StartTimeout: 20 * time.Second})
	if err == nil {
		t.Error("server writing garbage at start: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("start failures took %s", d)
	}
	// a process that never answers initialize
	_, err = StartChild(context.Background(), []string{"sleep", "60"}, ChildOptions{StartTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not complete MCP initialize") {
		t.Errorf("silent server: %v", err)
	}
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestChildCloseKillsDescendants: a grandchild in a session of its own (as Playwright
// starts Chromium) is ended by Close, and also when the server dies on its own.
func TestChildCloseKillsDescendants(t *testing.T) {
	for _, how := range []string{"close", "server-dies"} {
		t.Run(how, func(t *testing.T) {
			c := startFake(t, ChildOptions{})
			res, err := c.CallTool(context.Background(), "spawn", nil)
			if err != nil {
				t.Fatal(err)
			}
			gpid, err := strconv.Atoi(resultText(res))
			if err != nil || !alive(gpid) {
				t.Fatalf("grandchild %q not running", resultText(res))
			}
			if pgid, _ := syscall.Getpgid(gpid); pgid == c.Pid() {
				t.Fatalf("grandchild shares the server's group; the test proves nothing")
			}
			t.Cleanup(func() { syscall.Kill(gpid, syscall.SIGKILL) })
			if how == "close" {
				c.Close()
			} else {
				c.CallTool(context.Background(), "echo", nil) // the grandchild is now tracked
				syscall.Kill(c.Pid(), syscall.SIGKILL)
				<-c.Exited()
			}
			deadline := time.Now().Add(5 * time.Second)
			for alive(gpid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(gpid) {
				t.Errorf("grandchild %d still running", gpid)
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"npx @playwright/mcp --headless", []string{"npx", "@playwright/mcp", "--headless"}, false},
		{"  a\tb  ", []string{"a", "b"}, false},
		{`node '/path with space/cli.js' --x "a \"q\" b"`, []string{"node", "/path with space/cli.js", "--x", `a "q" b`}, false},
		{`a''b ""`, []string{"ab", ""}, false},
		{"", nil, true},
		{"   ", nil, true},
		{"'open", nil, true},
		{`"open`, nil, true},
	} {
		got, err := SplitCommand(tc.in)
		if (err != nil) != tc.err || (!tc.err && strings.Join(got, "|") != strings.Join(tc.want, "|")) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"a b", `"x y" 'z'`, `"\"`, "'", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := SplitCommand(s)
		if err == nil && len(words) == 0 {
			t.Fatalf("%q: no words and no error", s)
		}
		if err != nil && words != nil {
			t.Fatalf("%q: words with an error", s)
		}
	})
}

// TestChildReplyBounded: a reply over MaxReplyBytes fails its call with a clear error, and
// the session goes on (the next call is answered).
func TestChildReplyBounded(t *testing.T) {
	c := startFake(t, ChildOptions{MaxReplyBytes: 64 << 10})
	if _, err := c.CallTool(context.Background(), "big", map[string]any{"N": 200 << 10}); err == nil || !strings.Contains(err.Error(), "over 65536 bytes") {
		t.Errorf("a 200 KiB reply: err %v; want the size bound named", err)
	}
	res, err := c.CallTool(context.Background(), "big", map[string]any{"N": 1000})
	if err != nil || len(resultText(res)) != 1000 {
		t.Fatalf("the next call: %v %v", res, err)
	}
}
