package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pab-dev/pab/guard/devtools"
	"github.com/pab-dev/pab/guard/gate"
	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/tlsca"
)

// The browser the guard holds below the page (docs/guard.md, "Enforcement below the page"):
// the wire gate every request passes, the Chromium the guard starts (or the owner's it
// attaches to), and the guard's own DevTools session that holds every request of every
// target. @playwright/mcp is then pointed at that browser with --cdp-endpoint.

// heldBrowser is a browser held by the guard. Close ends what the guard started.
type heldBrowser struct {
	gate  *gate.Gate
	proc  *browser.Process // nil for the owner's browser
	holds *devtools.Session
	cdp   string        // the DevTools URL @playwright/mcp attaches to
	owner bool          // the owner's browser (--cdp-endpoint): the run has a context of its own there
	stop  chan struct{} // closed by Close: stops watchBrowser
}

// ownerContextArgs are @playwright/mcp's switches for the owner's browser: the run's pages
// in a browser context of their own (--isolated: Target.createBrowserContext) whose proxy is
// the wire gate (--proxy-server), so that every request of the run, WebSocket handshakes
// included, passes the gate whatever proxy the owner's browser has. The context accepts the
// gate's certificates (--ignore-https-errors: the gate, on loopback, is that context's only
// peer and checks the real sites' certificates itself). nil for the guard's own browser.
func (h *heldBrowser) ownerContextArgs() []string {
	if !h.owner {
		return nil
	}
	return []string{"--isolated", "--proxy-server", "http://" + h.gate.Addr(), "--ignore-https-errors"}
}

// watchBrowser marks holds lost (devtools.Session.Fail) once the process pid is gone or a
// zombie, checking every 250 ms until stop is closed.
func watchBrowser(pid int, holds *devtools.Session, stop <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := bytes.LastIndexByte(st, ')')
		if err != nil || i < 0 || i+2 >= len(st) || st[i+2] == 'Z' || st[i+2] == 'X' {
			holds.Fail(errors.New("the browser process ended"))
			return
		}
	}
}

// guardFeaturesOff adds, to internal/browser's features turned off, the service worker's
// speculative navigation request (ServiceWorkerAutoPreload), which no DevTools session can
// hold; with it off, the worker's own fetch is held like any other. Chromium honours only
// the last --disable-features, so the list is given whole.
const guardFeaturesOff = browser.FeaturesOff + ",ServiceWorkerAutoPreload"

// guardChromiumArgs are the switches of the guard's Chromium beside internal/browser.Args.
var guardChromiumArgs = []string{
	"--disable-features=" + guardFeaturesOff,
	"--disable-domain-reliability",
	"--no-pings",
}

// startHeldBrowser starts the wire gate (chained to o.Proxy when set, else forwarding to
// the real sites) and the DevTools session with policy, and either Chromium through the gate
// (headless unless o.Headed, trusting pab's CA by its SPKI hash only) or, for o.CDPEndpoint,
// attaches to the owner's running browser: there the session holds only the browser
// contexts made from then on, the one @playwright/mcp opens for the run with the gate as its
// proxy (ownerContextArgs). Errors name what failed; on error nothing is left running.
func startHeldBrowser(ctx context.Context, o RunOptions, policy *netpolicy.Policy, tmp string, log io.Writer) (*heldBrowser, error) {
	h := &heldBrowser{}
	ca, err := tlsca.LoadDefault()
	if err != nil {
		return nil, err
	}
	if o.CDPEndpoint != "" {
		ws, err := devToolsWebSocket(ctx, o.CDPEndpoint)
		if err != nil {
			return nil, fmt.Errorf("--cdp-endpoint: %v", err)
		}
		if h.gate, err = gate.Start(gate.Options{Policy: policy, CA: ca, Upstream: o.Proxy, ErrorLog: log}); err != nil {
			return nil, fmt.Errorf("wire gate: %v", err)
		}
		if h.holds, err = devtools.Attach(ctx, devtools.Options{URL: ws, Policy: policy, Log: log, NewContextsOnly: true}); err != nil {
			h.Close()
			return nil, fmt.Errorf("--cdp-endpoint: the guard cannot hold that browser's requests: %v", err)
		}
		h.cdp = o.CDPEndpoint
		h.owner = true
		return h, nil
	}
	exe, err := o.FindChromium(o.Chrome)
	if err != nil {
		return nil, err
	}
	if h.gate, err = gate.Start(gate.Options{Policy: policy, CA: ca, Upstream: o.Proxy, ErrorLog: log}); err != nil {
		return nil, fmt.Errorf("wire gate: %v", err)
	}
	bo := browser.Options{Proxy: h.gate.Addr(), SPKI: ca.SPKIHash(), Headed: o.Headed, Extra: guardChromiumArgs}
	if h.proc, err = browser.Start(ctx, exe, bo, "about:blank", filepath.Join(tmp, "chromium.log")); err != nil {
		h.Close()
		return nil, err
	}
	if h.holds, err = devtools.Attach(ctx, devtools.Options{URL: h.proc.CDP, Policy: policy, Log: log}); err != nil {
		h.Close()
		return nil, err
	}
	h.cdp = h.proc.CDP
	// the browser's end is the session's loss, whether or not its socket closes with it (its
	// helper processes keep the DevTools socket, and its stderr, open for a while after the
	// browser process was killed), so the process itself is watched
	h.stop = make(chan struct{})
	go watchBrowser(h.proc.PID(), h.holds, h.stop)
	return h, nil
}

// Alive reports whether the browser is still there: the process the guard started is
// running and the DevTools session holds.
func (h *heldBrowser) Alive() bool {
	select {
	case <-h.holds.Lost():
		return false
	default:
	}
	if h.owner {
		// the owner's browser runs on; the run's window is what the owner closes
		return h.holds.HeldPages() > 0
	}
	select {
	case err := <-h.proc.Exited():
		h.proc.Exited() <- err
		return false
	default:
		return true
	}
}

// Close ends the DevTools session, then the browser and the gate the guard started (the
// owner's browser keeps running).
func (h *heldBrowser) Close() {
	if h.stop != nil {
		close(h.stop)
	}
	if h.holds != nil {
		h.holds.Close()
	}
	if h.proc != nil {
		h.proc.Stop()
	}
	if h.gate != nil {
		h.gate.Close()
	}
}

// devToolsWebSocket is the browser-level DevTools websocket of the browser at endpoint: a
// ws:// URL as it is, else GET endpoint/json/version's webSocketDebuggerUrl (at most 64 KiB,
// within 10 seconds).
func devToolsWebSocket(ctx context.Context, endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if u.Scheme == "ws" || u.Scheme == "wss" {
		return endpoint, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u.Path = "/json/version"
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil || v.WebSocketDebuggerURL == "" {
		return "", errors.New(u.String() + " names no webSocketDebuggerUrl: is it a Chromium started with --remote-debugging-port?")
	}
	return v.WebSocketDebuggerURL, nil
}
