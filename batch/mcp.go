package batch

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pab-dev/pab/guard"
	"github.com/pab-dev/pab/internal/procgroup"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/wholebody"
)

// The browser MCP server of a run (pab run --browser --mcp, and pab guard for --guard),
// started by pab before the agent and handed over ready: it has answered initialize and
// tools/list with the browser tools through the endpoint the agent gets (PAB_MCP_URL, with
// the bearer token PAB_MCP_TOKEN). A server that is not ready within MCPReadyTimeout makes
// the run an error of kind browser_start before the agent is started, so no model call is
// spent on a run without its browser.

// MCPReadyTimeout is the default bound of a run's wait for its browser MCP server: started,
// listening, and answering tools/list with the browser tools.
const MCPReadyTimeout = 120 * time.Second

// mcpWantTool is the tool whose presence in tools/list says the server offers the browser.
const mcpWantTool = "browser_navigate"

// playwrightListening matches the line @playwright/mcp prints on stderr once it serves
// HTTP (--port): "Listening on http://localhost:PORT".
var playwrightListening = regexp.MustCompile(`Listening on (http://\S+)`)

// ErrorBrowserStart is the error kind of a run whose browser, browser MCP server or pab
// guard did not start or did not become ready: the agent was not started.
const ErrorBrowserStart = "browser_start"

// StartError is Task.Start's error for a run whose browser side did not start (Kind
// ErrorBrowserStart); runOne records its kind.
type StartError struct {
	Kind string
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// browserStartError wraps err as a StartError of kind ErrorBrowserStart.
func browserStartError(err error) error {
	return &StartError{Kind: ErrorBrowserStart, Err: err}
}

// mcpFront is a loopback reverse proxy in front of a run's MCP server that lets through
// only requests with the run's bearer token (Authorization: Bearer TOKEN), compared in
// constant time; anything else gets 401 and never reaches the server.
type mcpFront struct {
	URL   string // http://127.0.0.1:PORT/mcp
	Token string
	srv   *http.Server
	log   *frontLog // nil: errors are dropped
}

// startMCPFront serves a front for the MCP server at upstream (an http URL ending in /mcp)
// on a free loopback port. The requests it forwards carry upstream's host as their Host,
// except that a server listening on 127.0.0.1 that names itself localhost (as
// @playwright/mcp does, whose Host check accepts only that name) gets host.
// With rec, every tools/call through the front is recorded as a step (steps.go).
// tr forwards the requests (nil: newFrontTransport()).
func startMCPFront(upstream, host, token string, rec *stepRecorder, tr http.RoundTripper) (*mcpFront, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" {
		return nil, fmt.Errorf("browser MCP server address %q: want http://HOST:PORT/mcp", upstream)
	}
	if host == "" {
		host = u.Host
	}
	if tr == nil {
		tr = newFrontTransport()
	}
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: u.Host})
			r.Out.URL.Path = u.Path
			r.Out.Host = host
			r.Out.Header.Del("Authorization")
		},
		FlushInterval: -1, // server-sent events pass at once
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	var flog *frontLog
	if rec != nil {
		flog = &frontLog{path: filepath.Join(rec.dir, FileMCPFront)}
		rp.ErrorLog = log.New(flog, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	}
	var next http.Handler = wholeBody(rp, rp.ErrorLog)
	if rec != nil {
		next = rec.wrap(next)
	}
	want := []byte("Bearer " + token)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pab run"`)
			http.Error(w, "Authorization: Bearer $PAB_MCP_TOKEN is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &mcpFront{URL: "http://" + ln.Addr().String() + "/mcp", Token: token, log: flog,
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}}
	if flog != nil {
		f.srv.ErrorLog = rp.ErrorLog
	}
	go f.srv.Serve(ln)
	return f, nil
}

// maxFrontRequest bounds the body of a request through the front (bytes): pab guard's
// own bound (guard.MaxRequestBytes). A larger one gets 413 and does not reach the server.
const maxFrontRequest = guard.MaxRequestBytes

// wholeBody reads a request's body whole (at most maxFrontRequest bytes, wholebody.Read)
// and hands next the request with that copy as its body, so that the transport never reads
// the agent's body from the front's HTTP server, which closes it once the answer starts: a
// late read of it by the transport's writer cut the answer's stream (the agent gets a cut
// stream, FileMCPFront "use of closed network connection"; package wholebody has the
// cause). A larger body gets 413, an unreadable one 400; refusals go to errLog.
func wholeBody(next http.Handler, errLog *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		whole, err := wholebody.Read(r, maxFrontRequest)
		var tooLarge *readlimit.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			errLog.Printf("pab front: a request of more than %d bytes refused (413)", maxFrontRequest)
			http.Error(w, fmt.Sprintf("request too large: at most %d bytes pass", maxFrontRequest), http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			errLog.Printf("pab front: reading the request to pass on: %v", err)
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, whole)
	})
}

// newFrontTransport is the transport of a run's MCP front: its own, so that no other
// client in the process shares (or closes) its connections, with http.DefaultTransport's
// settings except two. No proxy: the server is on loopback. No keep-alive: each request
// goes to the server on a new connection, so none is written to a connection that the
// server is closing as idle (Node's http server, @playwright/mcp's, closes an idle one
// after 5 s by default), which the transport would not write again for a POST (the agent
// would get 502 for a call the server never read). On loopback a connection costs
// microseconds.
func newFrontTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DisableKeepAlives = true
	return tr
}

// Close stops the front at once (open streams are cut) and closes its log.
func (f *mcpFront) Close() {
	f.srv.Close()
	if f.log != nil {
		f.log.Close()
	}
}

// FileMCPFront is the file of a run directory where pab's MCP front writes what went wrong
// between the agent and the browser MCP server: an answer's stream that broke (the proxy's
// read or write error), a server that could not be reached, a request too large to pass
// (more than maxFrontRequest bytes). One line each, at most
// maxFrontLog bytes; absent when nothing went wrong.
const FileMCPFront = "browser-mcp-front.log"

// maxFrontLog bounds FileMCPFront (bytes); lines after it are dropped.
const maxFrontLog = 1 << 20

// frontLog appends lines to a file opened on the first line, up to maxFrontLog bytes.
type frontLog struct {
	path string
	mu   sync.Mutex
	f    *os.File
	n    int
	err  error
}

func (l *frontLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.n+len(p) > maxFrontLog {
		return len(p), nil
	}
	if l.f == nil {
		if l.f, l.err = os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); l.err != nil {
			return len(p), nil
		}
	}
	n, err := l.f.Write(p)
	l.n += n
	if err != nil {
		l.err = err
	}
	return len(p), nil
}

// Close closes the file; lines after it are dropped.
func (l *frontLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.err = os.ErrClosed
}

// bearerTransport adds the Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// waitMCPReady connects to the MCP endpoint as the agent will (streamable HTTP with the
// token), until it answers initialize and a tools/list that holds mcpWantTool, or until
// the deadline of ctx. It returns how many tools were listed. Errors say what was missing
// at the end: no answer, or the tools listed without the browser's.
func waitMCPReady(ctx context.Context, endpoint, token string) (int, error) {
	hc := &http.Client{Transport: bearerTransport{token}, Timeout: 30 * time.Second}
	var last error
	for {
		n, err := listMCPTools(ctx, endpoint, hc)
		if err == nil {
			return n, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, last
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func listMCPTools(ctx context.Context, endpoint string, hc *http.Client) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// guard.ReadinessClient: pab guard does not take it for the engine (its trace's engine.started)
	c := mcp.NewClient(&mcp.Implementation{Name: guard.ReadinessClient, Version: "1"}, nil)
	cs, err := c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return 0, fmt.Errorf("initialize: %v", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(cctx, nil)
	if err != nil {
		return 0, fmt.Errorf("tools/list: %v", err)
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	if !slices.Contains(names, mcpWantTool) {
		return len(names), fmt.Errorf("tools/list has no %s among %d tools", mcpWantTool, len(names))
	}
	return len(names), nil
}

// runMCP is a run's browser MCP server handed over ready: its front's URL and token.
type runMCP struct {
	URL, Token string
	stop       func()
}

// readyMCP puts a front with a new token in front of the MCP server at upstream (its Host
// header host, "" for upstream's own) and waits
// (at most timeout, from start) until it is ready; stop ends the front and then the server
// (stopServer). On error both are stopped and the error is a StartError.
// rec (nil: none) records the agent's tool calls through the front; it is closed by stop.
func readyMCP(ctx context.Context, upstream, host string, start time.Time, timeout time.Duration, stopServer func(), what string, rec *stepRecorder) (*runMCP, error) {
	if rec != nil {
		defer func() {
			if rec != nil {
				rec.Close()
			}
		}()
	}
	front, err := startMCPFront(upstream, host, guard.NewControlToken(), rec, nil)
	if err != nil {
		stopServer()
		return nil, browserStartError(fmt.Errorf("%s: %v", what, err))
	}
	wctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	if _, err := waitMCPReady(wctx, front.URL, front.Token); err != nil {
		front.Close()
		stopServer()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, browserStartError(fmt.Errorf("%s was not ready within %s (pab run --mcp-timeout): %v", what, timeout, err))
	}
	r := rec
	rec = nil // closed by stop from now on
	return &runMCP{URL: front.URL, Token: front.Token, stop: func() {
		front.Close()
		if r != nil {
			r.Close()
		}
		stopServer()
	}}, nil
}

// startPlaywrightMCP starts @playwright/mcp (found as pab guard finds it, run with node)
// serving streamable HTTP on a free loopback port, attached to the run's Chromium at cdp,
// its files in dir/.playwright-mcp and its stderr in dir/browser-mcp.stderr, and hands it
// over ready (readyMCP) within timeout.
func startPlaywrightMCP(ctx context.Context, repoRoot, cdp, dir string, timeout time.Duration, rec *stepRecorder) (*runMCP, error) {
	start := time.Now()
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, browserStartError(errors.New("--mcp: node not found on PATH (install Node.js, Debian's nodejs)"))
	}
	cli, err := guard.FindPlaywrightMCP(repoRoot)
	if err != nil {
		return nil, browserStartError(fmt.Errorf("--mcp: %v", err))
	}
	c := exec.Command(node, cli, "--port", "0", "--host", "127.0.0.1", "--cdp-endpoint", cdp,
		"--output-dir", filepath.Join(dir, ".playwright-mcp"))
	c.Dir = dir
	c.Env = os.Environ()
	logPath := filepath.Join(dir, "browser-mcp.stderr")
	w, err := procgroup.StartWatched(c, logPath, 10<<20, playwrightListening)
	if err != nil {
		return nil, browserStartError(fmt.Errorf("--mcp: start @playwright/mcp: %v", err))
	}
	addr, err := w.Wait(ctx, timeout)
	if err != nil {
		w.Stop()
		var ee *procgroup.ExitedError
		switch {
		case errors.As(err, &ee):
			return nil, browserStartError(fmt.Errorf("@playwright/mcp exited (%s) before listening (see browser-mcp.stderr)", ee.Status))
		case errors.Is(err, procgroup.ErrNoAddress):
			return nil, browserStartError(fmt.Errorf("@playwright/mcp did not listen within %s (see browser-mcp.stderr)", timeout))
		}
		return nil, err
	}
	// it prints localhost but listens where --host says
	u, err := url.Parse(addr)
	if err != nil {
		w.Stop()
		return nil, browserStartError(fmt.Errorf("@playwright/mcp printed %q", addr))
	}
	return readyMCP(ctx, "http://127.0.0.1:"+u.Port()+"/mcp", u.Host, start, timeout, w.Stop, "@playwright/mcp", rec)
}
