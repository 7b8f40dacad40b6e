package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/guard/netpolicy"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// One guard session (pab guard): the checks of its options, a temporary directory, the
// trace, the control API, the browser MCP server as a child, the Bridge, MCP served to the
// agent on stdio or HTTP, the result envelope, and the owner's browser kept open at review.

// RunOptions are the options of one guard session, Run; they are pab guard's flags (each
// field names its flag), and Run's errors name the flags ("guard: --listen: ..."), since
// pab guard prints them as they are. Application is required; every other field may be left
// zero.
type RunOptions struct {
	Application string // --application: the application file (YAML; docs/guard.md)
	Listen      string // --listen: serve MCP as streamable HTTP on this loopback address; "" = stdio
	Proxy       string // --proxy: host:port of a pab replay or record the default browser sends everything to
	BrowserMCP  string // --browser-mcp: "CMD ARGS" of the browser MCP server to start instead of @playwright/mcp
	Trace       string // --trace: the trace file (JSONL, truncated at the start); "" = none
	Result      string // --result: the result envelope file (JSON); "" = none
	Control     string // --control: the control API's loopback address; "" = 127.0.0.1 on a free port
	// ControlTokenFile (--control-token-file) receives the control API's bearer token and a
	// newline (mode 0600); "" = a file in the session's temporary directory, removed at exit.
	ControlTokenFile string
	Chrome           string // --chrome: the Chromium executable of the default browser; "" = chromium on PATH
	Headed           bool   // --headed: a visible Chromium, kept open at awaiting_review (needs $DISPLAY or $WAYLAND_DISPLAY)
	CDPEndpoint      string // --cdp-endpoint: the owner's running Chromium (a loopback DevTools URL), never closed
	// UnprotectedBrowser (--unprotected-browser) lets a --browser-mcp server run although the
	// guard cannot hold its browser below the page (no DevTools session, no wire gate): only
	// the page-level checks apply. Printed at the start and traced (note, protection off).
	UnprotectedBrowser bool
	// NoPageLock (--test-no-page-lock, for tests only) installs no page-side submit lock, so
	// that a test shows the browser's network layer and the wire gate alone stop everything.
	NoPageLock bool

	// RepoRoot, when set, returns the pab repository where @playwright/mcp is looked for
	// first (PlaywrightMCPCLI under it); an error means there is none (FindPlaywrightMCP).
	RepoRoot func() (string, error)
	// FindChromium returns the executable of the default browser from Chrome; its error is
	// printed as it is. nil = internal/browser.Find.
	FindChromium func(path string) (string, error)
	// Signals end the session like ctx's end (status "signal"), caught once the browser's
	// command line is ready (pab guard: os.Interrupt, syscall.SIGTERM). nil = none.
	Signals []os.Signal

	Stdin       *os.File  // MCP's input on stdio, and the owner's prompt with Listen on a terminal; nil = os.Stdin
	Stdout      io.Writer // MCP's output on stdio; nothing else is written to it; nil = os.Stdout
	Stderr      io.Writer // the session's messages ("pab guard: ..."); nil = os.Stderr
	ChildStderr *os.File  // the browser MCP server's standard error; nil = os.Stderr
}

// Run runs one guard session until the agent's session ends (stdin closed, the HTTP
// session over), ctx ends, one of o.Signals arrives, or the owner closes the run (POST
// ControlClosePath); with Headed and the run awaiting review it then waits for the owner
// (waitForOwner). Everything that can be checked (the options, the application file) is
// checked before anything starts. The result envelope is written to o.Result as soon as the
// run is done and again at the end; a failure to write it is printed on o.Stderr, not
// returned. Errors (one line each, "guard: ..." or the application file's "FILE:LINE:
// message"): bad options, the application file, the temporary directory, the trace, the
// control API or token, the browser MCP server's start, MCP serving, and a failed trace
// write.
func Run(ctx context.Context, o RunOptions) error {
	o = o.withDefaults()
	app, err := o.check()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "pab-guard-")
	if err != nil {
		return fmt.Errorf("guard: %w", err)
	}
	defer os.RemoveAll(tmp)
	if len(o.Signals) > 0 {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, o.Signals...)
		defer stop()
	}
	var traceFile *os.File
	var traceW io.Writer = io.Discard
	if o.Trace != "" {
		if traceFile, err = os.OpenFile(o.Trace, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err != nil {
			return fmt.Errorf("guard: --trace: %w", err)
		}
		defer traceFile.Close()
		traceW = traceFile
	}
	tracer := NewTracer(traceW, "")
	ctl, ctlAddr, stopControl, err := o.startControl(tmp)
	if err != nil {
		return err
	}
	defer stopControl()

	// the layers below the page: the request policy, the wire gate, the browser and the
	// guard's DevTools session (heldbrowser.go); their refusals go to the trace
	below := &belowPageTrace{emit: func(e Event) {
		e.At = time.Now().UTC().Format(time.RFC3339Nano)
		tracer.Emit(e)
	}}
	defer below.close()
	var policy *netpolicy.Policy
	var held *heldBrowser
	if o.BrowserMCP == "" {
		policy = netpolicy.New(app.Mode, app.Sites, below.refused)
		if held, err = startHeldBrowser(ctx, o, policy, tmp, o.Stderr); err != nil {
			return fmt.Errorf("guard: %v", err)
		}
		defer held.Close()
		upstream := "the real sites"
		if o.Proxy != "" {
			upstream = o.Proxy
		}
		if held.owner {
			fmt.Fprintf(o.Stderr, "pab guard: the run opens a window of its own in the browser at %s (a browser context of its own, not your profile's), held below the page: DevTools request holds, wire gate on %s to %s; your other tabs are not held\n", o.CDPEndpoint, held.gate.Addr(), upstream)
		} else {
			fmt.Fprintf(o.Stderr, "pab guard: browser held below the page: DevTools request holds, wire gate on %s to %s\n", held.gate.Addr(), upstream)
		}
	} else {
		fmt.Fprintf(o.Stderr, "pab guard: PROTECTION OFF (--unprotected-browser): the --browser-mcp server's browser is not held below the page; a page's own scripts can send what the agent types\n")
	}
	argv, lockToken, uploadDir, err := o.browserCommand(tmp, held)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "pab guard: browser MCP server: %s\n", strings.Join(argv, " "))
	child, err := StartChild(ctx, argv, ChildOptions{Stderr: o.ChildStderr})
	if err != nil {
		return fmt.Errorf("guard: %v", err)
	}
	defer child.Close()

	cfg := Config{App: app, Browser: child, Pauser: ctl, Trace: tracer, LockToken: lockToken, UploadDir: uploadDir,
		OwnerBrowser: o.Headed || o.CDPEndpoint != "", Net: policy}
	if held != nil {
		cfg.Holds, cfg.OwnerContext = held.holds, held.owner
	}
	bridge, err := NewBridge(cfg)
	if err != nil {
		return fmt.Errorf("guard: %v", err)
	}
	if held == nil {
		bridge.emit(Event{Type: "note", Detail: map[string]any{"protection": "off", "status": "unprotected_browser"}})
	}
	ctl.Attach(bridge)
	src := &resultWriter{bridge: bridge, path: o.Result, errOut: o.Stderr}
	defer src.write() // at exit: the final result

	// POST /local-apply/close while the agent works: the owner ends the run
	serveCtx, serveCancel := context.WithCancel(ctx)
	defer serveCancel()
	ownerClosed := make(chan struct{})
	go func() {
		select {
		case <-ctl.Closed():
			bridge.Cancel("The owner closed the run (POST " + ControlClosePath + ").")
			close(ownerClosed)
			serveCancel()
		case <-serveCtx.Done():
		}
	}()
	status, err := o.serve(ctx, serveCtx, ownerClosed, app, ctl, bridge, src)
	if err != nil {
		return err
	}
	if policy != nil && (o.Headed || o.CDPEndpoint != "") && bridge.Result().Outcome == "awaiting_review" && status == "disconnected" {
		// the owner reviews and submits in the browser themselves: nothing is held any more
		policy.Release()
		tracer.Emit(Event{Type: "note", At: time.Now().UTC().Format(time.RFC3339Nano), Detail: map[string]any{"status": "released_to_owner", "kind": "awaiting_review"}})
	}
	if (o.Headed || o.CDPEndpoint != "") && bridge.Result().Outcome == "awaiting_review" && status == "disconnected" {
		// the run's window (its browser context ends with the browser MCP server) stays until
		// the owner is done with it
		waitForOwner(ctx, ctl, child, held.Alive, o.Stderr, ctlAddr, o.CDPEndpoint != "")
	}
	if o.CDPEndpoint != "" {
		fmt.Fprintf(o.Stderr, "pab guard: run %s ended %s; the browser at %s stays open (pab guard did not start it)\n", app.ID, bridge.Result().Outcome, o.CDPEndpoint)
	}
	if err := tracer.Err(); err != nil {
		return fmt.Errorf("guard: --trace: %v", err)
	}
	return nil
}

// withDefaults fills the nil standard streams and FindChromium of o.
func (o RunOptions) withDefaults() RunOptions {
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.FindChromium == nil {
		o.FindChromium = findChromium
	}
	return o
}

// check checks everything that can be checked before anything starts and returns the
// application.
func (o RunOptions) check() (*Application, error) {
	if o.Application == "" {
		return nil, errors.New("guard: --application FILE is required")
	}
	app, err := LoadApplication(o.Application)
	if err != nil {
		return nil, firstLine(err)
	}
	for _, a := range []struct{ flag, addr string }{{"listen", o.Listen}, {"control", o.Control}} {
		if a.addr != "" {
			if err := checkLoopbackAddr(a.addr); err != nil {
				return nil, fmt.Errorf("guard: --%s: %v", a.flag, err)
			}
		}
	}
	if o.Proxy != "" {
		if err := checkHostPort(o.Proxy); err != nil {
			return nil, fmt.Errorf("guard: --proxy: %v", err)
		}
	}
	if o.CDPEndpoint != "" {
		if err := checkCDPEndpoint(o.CDPEndpoint); err != nil {
			return nil, fmt.Errorf("guard: --cdp-endpoint: %v", err)
		}
		for _, c := range []struct {
			flag string
			set  bool
		}{{"--browser-mcp", o.BrowserMCP != ""}, {"--headed", o.Headed}, {"--chrome", o.Chrome != ""}} {
			if c.set {
				return nil, fmt.Errorf("guard: give --cdp-endpoint or %s, not both (the owner's browser is already running)", c.flag)
			}
		}
	}
	if o.BrowserMCP != "" {
		if _, err := SplitCommand(o.BrowserMCP); err != nil {
			return nil, fmt.Errorf("guard: --browser-mcp: %v", err)
		}
	}
	if o.BrowserMCP != "" && !o.UnprotectedBrowser {
		return nil, errors.New("guard: --browser-mcp starts a browser the guard cannot hold below the page (no DevTools request holds, no wire gate), so a page's own scripts could send what the agent types: pass --unprotected-browser as well to run it with the page-level checks only")
	}
	if o.UnprotectedBrowser && o.BrowserMCP == "" {
		return nil, errors.New("guard: --unprotected-browser goes with --browser-mcp only (the default browser is always held)")
	}
	if o.Headed {
		if o.BrowserMCP != "" {
			return nil, errors.New("guard: give --headed or --browser-mcp, not both (--headed is for the default browser)")
		}
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return nil, errors.New("guard: --headed needs a display, and neither $DISPLAY nor $WAYLAND_DISPLAY is set (run it in the owner's desktop session, or under xvfb-run)")
		}
	}
	for _, p := range []struct{ flag, path string }{{"trace", o.Trace}, {"result", o.Result}, {"control-token-file", o.ControlTokenFile}} {
		if p.path != "" {
			if st, err := os.Stat(filepath.Dir(p.path)); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("guard: --%s %s: its directory does not exist", p.flag, p.path)
			}
		}
	}
	return app, nil
}

// browserCommand is the browser MCP server's command line: BrowserMCP's words, or the
// default @playwright/mcp attached to held (defaultBrowserMCP, files under tmp) with the
// submit lock's token ("" with NoPageLock) and the upload directory it reads from ("" and ""
// for a --browser-mcp server).
func (o RunOptions) browserCommand(tmp string, held *heldBrowser) (argv []string, lockToken, uploadDir string, err error) {
	if o.BrowserMCP != "" {
		if argv, err = SplitCommand(o.BrowserMCP); err != nil {
			return nil, "", "", fmt.Errorf("guard: --browser-mcp: %v", err)
		}
		return argv, "", "", nil
	}
	if !o.NoPageLock {
		lockToken = NewLockToken()
	}
	uploadDir = filepath.Join(tmp, "output") // @playwright/mcp reads uploads only from there (or its cwd)
	if argv, err = defaultBrowserMCP(o.RepoRoot, held.cdp, tmp, lockToken, held.ownerContextArgs()); err != nil {
		return nil, "", "", fmt.Errorf("guard: %v", err)
	}
	return argv, lockToken, uploadDir, nil
}

// startControl makes the run's controller with its token ($PAB_GUARD_CONTROL_TOKEN, which it
// then removes from the environment, else a new one), writes the token file, serves the
// control API and prints where. It returns the controller, the API's address, and the
// function that stops serving it.
func (o RunOptions) startControl(tmp string) (*Controller, string, func(), error) {
	ctl := NewController()
	tokenFromParent := false
	if tok, ok := os.LookupEnv(ControlTokenEnv); ok {
		tokenFromParent = true
		// from pab run --guard; kept out of the browser's environment
		os.Unsetenv(ControlTokenEnv)
		if err := ctl.SetToken(tok); err != nil {
			return nil, "", nil, fmt.Errorf("guard: $%s: %v", ControlTokenEnv, err)
		}
	}
	tokenFile := o.ControlTokenFile
	if tokenFile == "" {
		tokenFile = filepath.Join(tmp, "control-token")
	}
	if err := atomicfile.Write(tokenFile, []byte(ctl.Token()+"\n"), 0o600); err != nil {
		return nil, "", nil, fmt.Errorf("guard: --control-token-file: %v", err)
	}
	ctlAddr := o.Control
	if ctlAddr == "" {
		ctlAddr = "127.0.0.1:0"
	}
	ctlLn, err := ListenLoopback(ctlAddr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("guard: --control: %v", err)
	}
	ctlCtx, ctlCancel := context.WithCancel(context.Background())
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- ctl.ServeControl(ctlCtx, ctlLn) }()
	stop := func() { ctlCancel(); <-ctlDone }
	errOut := o.Stderr
	fmt.Fprintf(errOut, "pab guard: control http://%s (GET %s, GET %s, POST %s, POST %s, POST %s; header Authorization: Bearer TOKEN)\n",
		ctlLn.Addr(), ControlRunPath, ControlStatusPath, ControlResumePath, ControlCancelPath, ControlClosePath)
	if tokenFromParent {
		// the parent knows it; stderr may be a log file others can read
		fmt.Fprintf(errOut, "pab guard: control token from $%s (also in %s, mode 0600)\n", ControlTokenEnv, tokenFile)
	} else {
		fmt.Fprintf(errOut, "pab guard: control token %s (also in %s, mode 0600)\n", ctl.Token(), tokenFile)
	}
	return ctl, ctlLn.Addr().String(), stop, nil
}

// serve serves MCP to the agent (stdio, or HTTP on Listen) until its session ends or
// serveCtx ends (ctx's end, or the owner closed the run: ownerClosed is closed), then ends
// the bridge's engine with the status it returns (disconnected, closed_by_owner, signal or
// error) and writes the result. The error is a failed --listen or MCP serving.
func (o RunOptions) serve(ctx, serveCtx context.Context, ownerClosed <-chan struct{}, app *Application, ctl *Controller, bridge *Bridge, src *resultWriter) (string, error) {
	errOut := o.Stderr
	var serveErr error
	if o.Listen == "" {
		fmt.Fprintf(errOut, "pab guard: run %s (%s) serving MCP on stdio\n", app.ID, app.Mode)
		serveErr = Serve(serveCtx, src, NewStdioTransport(o.Stdin, o.Stdout))
	} else {
		ln, err := ListenLoopback(o.Listen)
		if err != nil {
			return "", fmt.Errorf("guard: --listen: %v", err)
		}
		fmt.Fprintf(errOut, "pab guard: run %s (%s) serving MCP on http://%s/mcp\n", app.ID, app.Mode, ln.Addr())
		if isTerminal(o.Stdin) {
			go ctl.Prompt(ctx, o.Stdin, errOut)
		}
		serveErr = ServeHTTP(serveCtx, src, ln)
	}
	status := "disconnected"
	select {
	case <-ownerClosed:
		status = "closed_by_owner"
	default:
		switch {
		case ctx.Err() != nil:
			status = "signal"
		case serveErr != nil && !errors.Is(serveErr, context.Canceled):
			status = "error"
		}
	}
	bridge.EngineEnded(status)
	src.write()
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		return status, fmt.Errorf("guard: %v", serveErr)
	}
	return status, nil
}

// firstLine keeps only the first line of err, so that a bad application file gives one
// clear line ("FILE:LINE: message").
func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return errors.New(s)
}

// checkLoopbackAddr checks that addr can be listened on with ListenLoopback, by
// listening and closing at once.
func checkLoopbackAddr(addr string) error {
	ln, err := ListenLoopback(addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// checkHostPort checks that s is host:port with a non-empty host and port.
func checkHostPort(s string) error {
	if strings.Contains(s, "://") {
		return fmt.Errorf("%q: want host:port without a scheme, e.g. 127.0.0.1:8899", s)
	}
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:8899", s)
	}
	return nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// resultWriter passes calls to the bridge and writes the result envelope to path once the
// run is done (and again by write at exit).
type resultWriter struct {
	bridge *Bridge
	path   string
	errOut io.Writer
	mu     sync.Mutex
}

// EngineStarted passes the agent's MCP clientInfo name to the bridge (engine.started).
func (r *resultWriter) EngineStarted(engine string) { r.bridge.EngineStarted(engine) }

func (r *resultWriter) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	return r.bridge.ListTools(ctx)
}

func (r *resultWriter) CallTool(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	res := r.bridge.CallTool(ctx, name, args)
	if r.bridge.Done() {
		r.write()
	}
	return res
}

// write writes the result envelope atomically (a temporary file renamed over path).
func (r *resultWriter) write() {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := atomicfile.WriteJSON(r.path, r.bridge.Result(), 0o644); err != nil {
		fmt.Fprintf(r.errOut, "pab guard: --result: %v\n", err)
	}
}
