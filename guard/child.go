package guard

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/internal/procgroup"
)

// BrowserProtocolVersion is the MCP protocol version offered to the browser MCP server.
// @playwright/mcp 0.0.x speaks 2025-06-18 and rejects newer versions instead of negotiating.
const BrowserProtocolVersion = "2025-06-18"

// Defaults of ChildOptions.
const (
	DefaultChildStartTimeout = 60 * time.Second  // start + MCP initialize
	DefaultChildCallTimeout  = 120 * time.Second // one tools/call or tools/list
	maxChildTools            = 1000              // tools/list pages are read up to this many tools
	childStopGrace           = 3 * time.Second   // Close: wait after closing stdin, then after SIGTERM
)

// ChildOptions sets how StartChild runs the browser MCP server.
type ChildOptions struct {
	// Stderr receives the server's standard error (and its browser's). It must be an
	// *os.File so that no copying goroutine outlives the process; nil means os.Stderr.
	Stderr *os.File
	// Env is the server's environment; nil means this process's environment.
	Env []string
	// Dir is the server's working directory; "" means this process's.
	Dir string
	// StartTimeout bounds starting the server and the MCP initialize handshake;
	// 0 means DefaultChildStartTimeout.
	StartTimeout time.Duration
	// CallTimeout bounds each ListTools or CallTool; 0 means DefaultChildCallTimeout.
	CallTimeout time.Duration
	// ProtocolVersion is the MCP version offered; "" means BrowserProtocolVersion.
	ProtocolVersion string
	// MaxReplyBytes bounds one message (one line) from the server; 0 means
	// DefaultMaxChildReplyBytes. A reply over it is dropped and its call fails with a
	// JSON-RPC error; the session goes on (see boundedReplies).
	MaxReplyBytes int
}

// Child is a browser MCP server running as a child process, spoken to over its stdin and
// stdout (newline-delimited JSON-RPC). It implements Browser. The server runs in a process
// group of its own; the processes it starts (a browser, which Playwright puts in groups of
// their own) are tracked through /proc and ended with it by Close. Safe for concurrent use.
type Child struct {
	argv        []string
	cmd         *exec.Cmd
	session     *mcp.ClientSession
	stdin       *os.File // our end of the child's stdin
	stdout      *os.File // our end of the child's stdout
	callTimeout time.Duration

	exited  chan struct{} // closed once the server process has been waited for
	waitErr error         // its exit status; read after exited is closed

	mu      sync.Mutex
	tracked map[int]uint64 // pid -> start time (clock ticks) of every descendant seen
	broken  error          // set once the connection failed: later calls fail at once

	closeOnce sync.Once
	closeErr  error
	stopTrack chan struct{}
}

// StartChild starts argv (argv[0] is looked up on PATH) as a browser MCP server and
// completes the MCP initialize handshake with it, offering opts.ProtocolVersion. ctx bounds
// only the start (together with opts.StartTimeout); the server then runs until Close.
// Errors: an empty argv, a program that cannot be started, or a server that exits or does
// not answer initialize in time (the error names the command and its exit status).
func StartChild(ctx context.Context, argv []string, opts ChildOptions) (*Child, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("browser MCP server: empty command")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultChildStartTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultChildCallTimeout
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = BrowserProtocolVersion
	}
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = DefaultMaxChildReplyBytes
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("browser MCP server: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("browser MCP server: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = opts.Env
	cmd.Dir = opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	// A group of its own, so that Close reaches every helper it starts in that group; and
	// killed with pab should pab itself be killed.
	procgroup.Set(cmd, true)
	cmd.WaitDelay = childStopGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("browser MCP server: start %s: %w", argv[0], err)
	}
	c := &Child{
		argv:        append([]string(nil), argv...),
		cmd:         cmd,
		stdin:       inW,
		stdout:      outR,
		callTimeout: opts.CallTimeout,
		exited:      make(chan struct{}),
		tracked:     map[int]uint64{},
		stopTrack:   make(chan struct{}),
	}
	go c.wait()
	go c.trackLoop()

	sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "pab-guard", Version: "1"}, nil)
	type connected struct {
		s   *mcp.ClientSession
		err error
	}
	done := make(chan connected, 1)
	go func() {
		t := &mcp.IOTransport{Reader: newBoundedReplies(outR, opts.MaxReplyBytes), Writer: inW, MaxLineLength: opts.MaxReplyBytes + 1024}
		s, err := client.Connect(sctx, t,
			&mcp.ClientSessionOptions{ProtocolVersion: opts.ProtocolVersion})
		done <- connected{s, err}
	}()
	var res connected
	select {
	case res = <-done:
	case <-c.exited:
		// The server died before answering: its stdout is at EOF, so Connect ends soon.
		select {
		case res = <-done:
		case <-time.After(childStopGrace):
			res.err = errors.New("no answer")
		}
		if res.err == nil {
			res.s.Close()
			res.err = errors.New("exited")
		}
	}
	if res.err != nil {
		if sctx.Err() == nil {
			// an EOF can be seen before the exit: give the exit a moment to be reaped
			select {
			case <-c.exited:
			case <-time.After(time.Second):
			}
		}
		exitedEarly := c.hasExited()
		c.Close()
		if exitedEarly {
			return nil, fmt.Errorf("browser MCP server %s exited (%s) during MCP initialize: %v", c.name(), procgroup.ExitStatus(c.waitErr), res.err)
		}
		if sctx.Err() != nil {
			return nil, fmt.Errorf("browser MCP server %s did not complete MCP initialize within %s", c.name(), opts.StartTimeout)
		}
		return nil, fmt.Errorf("browser MCP server %s: MCP initialize: %v", c.name(), res.err)
	}
	c.session = res.s
	return c, nil
}

// name is the command for messages: its program name.
func (c *Child) name() string { return filepath.Base(c.argv[0]) }

// Pid is the process id of the server (also its process group id).
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Exited is closed once the server process has ended.
func (c *Child) Exited() <-chan struct{} { return c.exited }

func (c *Child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// wait reaps the server. Once it is gone its helpers are useless: they are ended too, which
// also releases any copy of its stdout they hold, so that pending calls fail with EOF; if
// stdout is still open after a grace period, it is closed.
func (c *Child) wait() {
	err := c.cmd.Wait()
	c.waitErr = err
	close(c.exited)
	c.killTracked()
	t := time.NewTimer(childStopGrace)
	defer t.Stop()
	select {
	case <-c.stopTrack:
	case <-t.C:
		c.stdout.Close()
	}
}

// ListTools returns every tool the server lists (all pages, up to 1000 tools), with their
// input schemas as the server sent them. Errors: the server has exited or its connection
// failed, the call timed out (ChildOptions.CallTimeout), or ctx ended.
func (c *Child) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	c.refreshTracked()
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for {
		res, err := c.session.ListTools(cctx, params)
		if err != nil {
			return nil, c.callError("tools/list", cctx, ctx, err)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			return tools, nil
		}
		if len(tools) >= maxChildTools {
			return nil, fmt.Errorf("browser MCP server %s lists more than %d tools", c.name(), maxChildTools)
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// CallTool calls one tool of the server with args (nil means no arguments) and returns its
// result as sent (a tool-level failure is a result with IsError). Errors, returned without
// waiting for the timeout when the server is gone: the server has exited, its output was
// not JSON-RPC, the call timed out (ChildOptions.CallTimeout), or ctx ended.
func (c *Child) CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	c.refreshTracked()
	if args == nil {
		args = map[string]any{}
	}
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	res, err := c.session.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, c.callError(name, cctx, ctx, err)
	}
	if res == nil {
		return nil, fmt.Errorf("browser MCP server %s: %s: empty result", c.name(), name)
	}
	return res, nil
}

// usable fails when the server has exited or its connection broke.
func (c *Child) usable() error {
	if c.hasExited() {
		return fmt.Errorf("browser MCP server %s has exited (%s)", c.name(), procgroup.ExitStatus(c.waitErr))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// callError describes a failed request: a timeout, the caller's cancel, the server's exit,
// or a broken connection (which makes every later call fail at once).
func (c *Child) callError(what string, cctx, ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("browser MCP server %s: %s: %w", c.name(), what, ctx.Err())
	case cctx.Err() != nil:
		return fmt.Errorf("browser MCP server %s: %s: no answer within %s", c.name(), what, c.callTimeout)
	}
	// A connection failure and the process exit race: give the exit a moment to be seen.
	select {
	case <-c.exited:
	case <-time.After(200 * time.Millisecond):
	}
	if c.hasExited() {
		return fmt.Errorf("browser MCP server %s exited (%s) during %s", c.name(), procgroup.ExitStatus(c.waitErr), what)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		// A JSON-RPC error answer: the connection itself is fine.
		return fmt.Errorf("browser MCP server %s: %s: %v", c.name(), what, err)
	}
	if isConnectionError(err) {
		c.mu.Lock()
		if c.broken == nil {
			c.broken = fmt.Errorf("browser MCP server %s: connection broken: %v", c.name(), err)
		}
		c.mu.Unlock()
		return fmt.Errorf("browser MCP server %s: %s: connection broken (its output was not JSON-RPC, or it closed stdout): %v", c.name(), what, err)
	}
	return fmt.Errorf("browser MCP server %s: %s: %v", c.name(), what, err)
}

// isConnectionError reports whether err means the JSON-RPC stream is unusable.
func isConnectionError(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection closed", "invalid character", "EOF", "trailing data", "file already closed", "broken pipe"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Close ends the server: it closes the MCP session (the server's stdin, on which
// @playwright/mcp closes its browser and exits), waits up to 3 s, sends SIGTERM to the
// server's process group and every tracked descendant, waits up to 3 s more, then SIGKILLs
// whatever is left. It returns nil once the server is gone (its exit status is not an
// error: it was asked to stop); calling it again returns the same.
func (c *Child) Close() error {
	c.closeOnce.Do(func() {
		c.refreshTracked()
		if c.session != nil {
			done := make(chan struct{})
			go func() { c.session.Close(); close(done) }()
			select {
			case <-done:
			case <-time.After(childStopGrace):
			}
		}
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(childStopGrace):
			c.refreshTracked()
			c.signalAll(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(childStopGrace):
			}
		}
		c.signalAll(syscall.SIGKILL)
		select {
		case <-c.exited:
		case <-time.After(childStopGrace):
			c.closeErr = fmt.Errorf("browser MCP server %s (pid %d) did not exit after SIGKILL", c.name(), c.Pid())
		}
		close(c.stopTrack)
		c.killTracked()
		c.stdout.Close()
	})
	return c.closeErr
}

// signalAll sends sig to the server's process group and to every tracked descendant (and
// its group, when it leads one).
func (c *Child) signalAll(sig syscall.Signal) {
	procgroup.Signal(c.cmd.Process.Pid, sig) //nolint:errcheck // a gone group ends the same way
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, start := range c.tracked {
		if st, ok := procStart(pid); !ok || st != start {
			delete(c.tracked, pid) // gone, or the pid was reused
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			procgroup.Signal(pid, sig) //nolint:errcheck
		}
		syscall.Kill(pid, sig)
	}
}

// killTracked SIGKILLs the server's group and every tracked descendant still alive.
func (c *Child) killTracked() { c.signalAll(syscall.SIGKILL) }

// trackLoop refreshes the set of descendants every second while the server runs, so that
// processes it started are known even if it dies without stopping them.
func (c *Child) trackLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.refreshTracked()
		case <-c.exited:
			return
		case <-c.stopTrack:
			return
		}
	}
}

// refreshTracked adds every current descendant of the server (found through /proc) to the
// tracked set. It does nothing once the server has exited (its orphans have new parents).
func (c *Child) refreshTracked() {
	if c.hasExited() {
		return
	}
	desc := descendants(c.cmd.Process.Pid)
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, start := range desc {
		c.tracked[pid] = start
	}
}

// descendants returns the pids (with their start times) of every process below root, read
// from /proc/*/stat. On a system without /proc it returns none.
func descendants(root int) map[int]uint64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	starts := map[int]uint64{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, ok := procStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		starts[pid] = start
	}
	out := map[int]uint64{}
	queue := []int{root}
	for len(queue) > 0 && len(out) < 10000 {
		p := queue[0]
		queue = queue[1:]
		for _, ch := range children[p] {
			if _, seen := out[ch]; !seen {
				out[ch] = starts[ch]
				queue = append(queue, ch)
			}
		}
	}
	return out
}

// procStart returns the start time of pid (clock ticks since boot), false when it is gone.
func procStart(pid int) (uint64, bool) {
	_, start, ok := procStat(pid)
	return start, ok
}

// procStat reads the parent pid and start time of pid from /proc/PID/stat.
func procStat(pid int) (ppid int, start uint64, ok bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	if err != nil && line == "" {
		return 0, 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, false
	}
	f2 := strings.Fields(line[i+1:])
	// f2[0] is field 3 (state), f2[1] field 4 (ppid), f2[19] field 22 (starttime).
	if len(f2) < 20 {
		return 0, 0, false
	}
	pp, err1 := strconv.Atoi(f2[1])
	st, err2 := strconv.ParseUint(f2[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pp, st, true
}

// SplitCommand splits a command line into words on spaces; '...' and "..." quote (no
// escapes inside single quotes; \" and \\ inside double quotes). Errors: an unclosed quote,
// or no words.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%q: unclosed '", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("%q: unclosed \"", s)
			}
			inWord = true
		case ch < 0x80 && unicode.IsSpace(rune(ch)):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%q: no command", s)
	}
	return words, nil
}

// BrowserAlive reports whether a browser the server started is still running: a live
// descendant of the server whose program name holds "chrom" (Chromium, Chrome) and whose
// arguments have no "--type=" (the browser process itself, not one of its renderers or
// helpers). With --headed, pab guard waits on it: the owner closing the browser's last
// window ends the browser process. False once the server has exited.
func (c *Child) BrowserAlive() bool {
	if c.hasExited() {
		return false
	}
	for pid := range descendants(c.cmd.Process.Pid) {
		if isBrowserProcess(pid) {
			return true
		}
	}
	return false
}

// isBrowserProcess reads /proc/PID/cmdline (at most 64 KiB) and /proc/PID/stat: a running
// (not zombie) Chromium browser process, see BrowserAlive.
func isBrowserProcess(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	data, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	f.Close()
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	name := strings.ToLower(filepath.Base(args[0]))
	if len(args) == 0 || !strings.Contains(name, "chrom") || strings.Contains(name, "crashpad") {
		return false
	}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "--type=") {
			return false
		}
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(st), ')')
	return i >= 0 && i+2 < len(st) && st[i+2] != 'Z' && st[i+2] != 'X'
}
