package main

// This file is the start mode (-start): the page-load time of a task from the launch of
// `pab replay`, one number per launch.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"time"

	"github.com/pab-dev/pab/internal/procgroup"
)

// StartResult is the outcome of one -start launch. Times are in milliseconds from the
// launch of the command.
type StartResult struct {
	Kind  string `json:"kind"` // "pagestart"
	Label string `json:"label"`
	Mode  string `json:"mode,omitempty"` // -mode, copied ("cold", "warm")
	Rep   int    `json:"rep"`
	URL   string `json:"url"`
	// Total is from the launch of the command to the return of the page's load wait
	// (Page.navigate answered, the load event fired, and one Runtime.evaluate to read the
	// navigation timing).
	Total float64 `json:"total_ms"`
	// Listen is when the command printed its proxy address; Browser when Chromium, started
	// then, answered over CDP; Load is the page's own Navigation Timing loadEventStart
	// (navigation start to the load event).
	Listen    float64 `json:"listen_ms"`
	Browser   float64 `json:"browser_ms"`
	Load      float64 `json:"load_ms"`
	Responses int     `json:"responses"`
}

// startAddr finds the proxy's address in the command's stderr ("... on http://ADDR").
var startAddr = regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)`)

// runStart launches argv (a `pab replay TASK --listen 127.0.0.1:0 ...` command line), waits
// for its proxy address on stderr, starts Chromium with that proxy (startChromium), loads pageURL once in a new browser
// context with the cache disabled, and stops the command's process group (TERM, then
// KILL after 5 s). A load that fails or answers a response that is not 200 is an error.
func runStart(caFile, pageURL, chrome, label, mode string, rep int, timeout time.Duration, argv []string) (*StartResult, error) {
	if len(argv) == 0 {
		return nil, errors.New("-start needs a command after --")
	}
	if _, err := exec.LookPath(chrome); err != nil { // before the launch: fail fast
		return nil, errors.New("chromium not found: install Debian's package chromium (apt-get install chromium)")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	procgroup.Set(cmd, true)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		procgroup.Stop(cmd.Process.Pid, done, 5*time.Second)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := startAddr.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
	}()
	res := &StartResult{Kind: "pagestart", Label: label, Mode: mode, Rep: rep, URL: pageURL}
	var proxy string
	select {
	case proxy = <-addr:
		res.Listen = ms(time.Since(t0))
	case <-time.After(timeout):
		return nil, fmt.Errorf("no proxy address on the command's stderr within %s", timeout)
	}
	browserCtx, stop, err := startChromium(proxy, caFile, chrome)
	if err != nil {
		return nil, err
	}
	defer stop()
	res.Browser = ms(time.Since(t0))
	l := loadPage(browserCtx, pageURL, timeout)
	res.Total = ms(time.Since(t0))
	if l.bad != "" {
		return nil, fmt.Errorf("load %s: %s", pageURL, l.bad)
	}
	res.Load, res.Responses = l.ms, l.responses
	return res, nil
}

// ms is d in milliseconds, to 0.1 ms.
func ms(d time.Duration) float64 { return float64(d.Microseconds()/100) / 10 }
