// Command pageload times how long Debian's Chromium takes to load one page through a
// replay proxy (bench/README.md): the page-load page of bench/gen (one HTML page and its
// ~60 scripts, style sheets and images on the same host), loaded -n times, each time in a
// new tab of a new browser context (its own connections, so every load opens its tunnels
// again) with the cache disabled (Network.setCacheDisabled).
//
//	pageload -proxy 127.0.0.1:18080 -ca ca.pem -url https://www.bench.test/pl/index.html -n 20 -label "pab h2"
//
// Chromium runs headless with --proxy-server, the proxy's CA trusted through
// --ignore-certificate-errors-spki-list (the SPKI hash of -ca, as pab browser does),
// QUIC off and --no-sandbox as root. A load's time is the page's Navigation Timing
// loadEventStart: from navigation start to the load event. The protocol of every response
// is taken from CDP's Network.responseReceived (Response.protocol: "h2", "http/1.1"). A
// load that does not answer all -expect responses with 200 is counted as failed, not
// timed. With -watch PID, the CPU time of that process tree (the proxy) over the timed
// loads is divided by their number. It prints one JSON object on stdout and a summary on
// stderr. Only for loopback proxies: it refuses a -proxy that is not on 127.0.0.0/8 or ::1.
//
//	pageload -start -ca ca.pem -url http://books.toscrape.com/ -label new -mode warm -- pab --repo R replay TASK --listen 127.0.0.1:0
//
// With -start (start.go) it measures a task's page load from the launch of `pab replay`:
// it runs the command after --, waits for its proxy address, starts Chromium on it and
// loads -url once, and prints the time from the launch to the load event
// (bench/pageload/start.sh loops it, cold and warm, against a baseline binary).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/bench/proctree"
	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
)

// Result is the printed outcome. Times are in milliseconds.
type Result struct {
	Kind      string    `json:"kind"` // "pageload"
	Label     string    `json:"label"`
	Proto     string    `json:"proto,omitempty"` // what the proxy was set to offer (-proto), copied
	Rep       int       `json:"rep"`
	URL       string    `json:"url"`
	Loads     int       `json:"loads"`  // timed loads that succeeded
	Failed    int       `json:"failed"` // loads that failed or missed responses
	Median    float64   `json:"median_ms"`
	P90       float64   `json:"p90_ms"`
	Min       float64   `json:"min_ms"`
	Max       float64   `json:"max_ms"`
	WallMed   float64   `json:"wall_median_ms"` // from sending Page.navigate to its load wait returning
	Samples   []float64 `json:"samples_ms"`
	Responses int       `json:"responses"`  // per load (the last successful one)
	Protocols string    `json:"protocols"`  // Response.protocol of every response of the timed loads, with counts
	ProtoSeen string    `json:"proto_seen"` // the one protocol seen, or "mixed"
	FirstErr  string    `json:"first_error,omitempty"`
	// CPUPerLoad is the CPU time (user+system) of the -watch process tree per timed load.
	CPUPerLoad float64 `json:"cpu_ms_per_load,omitempty"`
}

func main() {
	proxy := flag.String("proxy", "", "proxy address host:port (loopback only)")
	caFile := flag.String("ca", "", "PEM file of the CA the proxy signs with (its SPKI hash is given to Chromium)")
	pageURL := flag.String("url", "https://www.bench.test/pl/index.html", "the page to load")
	n := flag.Int("n", 20, "timed loads")
	warm := flag.Int("warmup", 2, "untimed loads first")
	expect := flag.Int("expect", 0, "responses a complete load has (the page and its subresources); 0: do not check")
	label := flag.String("label", "", "label copied into the result")
	rep := flag.Int("rep", 0, "repetition number copied into the result")
	timeout := flag.Duration("timeout", 30*time.Second, "give up on one load after this long")
	chrome := flag.String("chromium", "chromium", "Chromium executable (looked up on PATH)")
	proto := flag.String("proto", "", "copied into the result: what the proxy was set to offer (h1, h2)")
	watch := flag.Int("watch", 0, "PID whose process tree's CPU time is measured over the timed loads")
	start := flag.Bool("start", false, "start mode: launch the command after -- (pab replay TASK --listen 127.0.0.1:0 ...), start Chromium on its proxy and load -url once; print the time from the launch to the load event")
	mode := flag.String("mode", "", "with -start: copied into the result (cold, warm)")
	flag.Parse()
	if *start {
		r, err := runStart(*caFile, *pageURL, *chrome, *label, *mode, *rep, *timeout, flag.Args())
		if err != nil {
			fmt.Fprintln(os.Stderr, "pageload:", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		fmt.Fprintf(os.Stderr, "pageload -start %s %s: %.1f ms from the launch to the load event (address %.1f, Chromium %.1f, page load %.1f ms; %d responses)\n",
			r.Label, r.Mode, r.Total, r.Listen, r.Browser, r.Load, r.Responses)
		return
	}
	r, err := run(*proxy, *caFile, *pageURL, *chrome, *label, *rep, *n, *warm, *expect, *timeout, *watch)
	if r != nil {
		r.Proto = *proto
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pageload:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(r)
	fmt.Fprintf(os.Stderr, "pageload %s %s: %d loads (%d failed), median %.1f ms, p90 %.1f ms, min %.1f, max %.1f; %d responses a load; protocols %s; proxy CPU %.1f ms a load\n",
		r.Label, r.Proto, r.Loads, r.Failed, r.Median, r.P90, r.Min, r.Max, r.Responses, r.Protocols, r.CPUPerLoad)
}

// spkiHash is the base64 SHA-256 of the certificate's SubjectPublicKeyInfo in caFile.
func spkiHash(caFile string) (string, error) {
	data, err := os.ReadFile(caFile)
	if err != nil {
		return "", err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return "", fmt.Errorf("%s: no PEM certificate", caFile)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// startChromium starts Chromium (the executable chrome, looked up on PATH) with
// internal/browser's flags, proxy as its proxy and the CA of caFile trusted by its SPKI
// hash, in a temporary profile, and returns its CDP context; stop ends it and removes the
// profile.
func startChromium(proxy, caFile, chrome string) (ctx context.Context, stop func(), err error) {
	spki, err := spkiHash(caFile)
	if err != nil {
		return nil, nil, err
	}
	exe, err := exec.LookPath(chrome)
	if err != nil {
		return nil, nil, errors.New("chromium not found: install Debian's package chromium (apt-get install chromium)")
	}
	profile, err := os.MkdirTemp("", "pageload-profile-")
	if err != nil {
		return nil, nil, err
	}
	opts := cdpalloc.Options(exe, browser.Options{Proxy: proxy, SPKI: spki, Profile: profile})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	stop = func() {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(profile)
	}
	if err := chromedp.Do(browserCtx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("start chromium: %w", err)
	}
	return browserCtx, stop, nil
}

// loadOne is one page load's outcome.
type loadOne struct {
	ms, wall  float64
	responses int
	protos    map[string]int
	bad       string
}

func run(proxy, caFile, pageURL, chrome, label string, rep, n, warm, expect int, timeout time.Duration, watch int) (*Result, error) {
	host, _, err := net.SplitHostPort(proxy)
	if err != nil {
		return nil, fmt.Errorf("-proxy %q: %w", proxy, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("-proxy %q: only a loopback proxy (127.0.0.0/8, ::1)", proxy)
	}
	if n < 1 {
		return nil, errors.New("-n: want at least 1")
	}
	browserCtx, stop, err := startChromium(proxy, caFile, chrome)
	if err != nil {
		return nil, err
	}
	defer stop()

	res := &Result{Kind: "pageload", Label: label, Rep: rep, URL: pageURL}
	protos := map[string]int{}
	var wall []float64
	var cpu0 float64
	for i := 0; i < warm+n; i++ {
		if i == warm && watch > 0 {
			cpu0, _ = proctree.Stats(watch)
		}
		l := loadPage(browserCtx, pageURL, timeout)
		if l.bad == "" && expect > 0 && l.responses != expect {
			l.bad = fmt.Sprintf("%d responses with status 200, want %d", l.responses, expect)
		}
		if i < warm {
			if l.bad != "" { // the warmup load must work too: a broken setup fails fast
				return nil, fmt.Errorf("warmup load of %s: %s", pageURL, l.bad)
			}
			continue
		}
		if l.bad != "" {
			res.Failed++
			if res.FirstErr == "" {
				res.FirstErr = l.bad
			}
			continue
		}
		res.Samples = append(res.Samples, l.ms)
		wall = append(wall, l.wall)
		res.Responses = l.responses
		for p, c := range l.protos {
			protos[p] += c
		}
	}
	res.Loads = len(res.Samples)
	if watch > 0 {
		cpu1, _ := proctree.Stats(watch)
		res.CPUPerLoad = math.Round((cpu1-cpu0)*1000/float64(n)*10) / 10
	}
	if res.Loads > 0 {
		s := slices.Sorted(slices.Values(res.Samples))
		res.Median, res.P90, res.Min, res.Max = quantile(s, 0.5), quantile(s, 0.9), s[0], s[len(s)-1]
		slices.Sort(wall)
		res.WallMed = quantile(wall, 0.5)
	}
	var names []string
	for p := range protos {
		names = append(names, p)
	}
	sort.Strings(names)
	var parts []string
	for _, p := range names {
		parts = append(parts, fmt.Sprintf("%s %d", p, protos[p]))
	}
	res.Protocols = strings.Join(parts, ", ")
	switch len(names) {
	case 0:
	case 1:
		res.ProtoSeen = names[0]
	default:
		res.ProtoSeen = "mixed"
	}
	return res, nil
}

// loadPage loads pageURL once in a new tab of a new browser context, cache disabled.
func loadPage(browserCtx context.Context, pageURL string, timeout time.Duration) loadOne {
	tab, cancelTab := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		return loadOne{bad: "open a tab: " + err.Error()}
	}
	var (
		mu     sync.Mutex
		ok     int
		failed []string
		protos = map[string]int{}
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventResponseReceived:
			if e.Response == nil || !strings.HasPrefix(e.Response.URL, "http") || strings.HasSuffix(e.Response.URL, "/favicon.ico") {
				return // Chromium asks for a favicon on its own (the page declares none)
			}
			protos[e.Response.Protocol]++
			if e.Response.Status == 200 {
				ok++
			} else {
				failed = append(failed, fmt.Sprintf("%s: status %d", e.Response.URL, e.Response.Status))
			}
		case *network.EventLoadingFailed:
			failed = append(failed, "loading failed: "+e.ErrorText)
		}
	}); err != nil {
		return loadOne{bad: "listen: " + err.Error()}
	}
	if _, err := chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return loadOne{bad: "disable the cache: " + err.Error()}
	}
	t0 := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		return loadOne{bad: "navigate: " + err.Error()}
	}
	wall := time.Since(t0)
	nav, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		LoadEventStart float64 `json:"loadEventStart"`
	}](`performance.getEntriesByType("navigation")[0].toJSON()`))
	if err != nil {
		return loadOne{bad: "navigation timing: " + err.Error()}
	}
	mu.Lock()
	defer mu.Unlock()
	l := loadOne{ms: math.Round(nav.LoadEventStart*10) / 10, wall: float64(wall.Microseconds()) / 1000, responses: ok, protos: maps.Clone(protos)}
	if len(failed) > 0 {
		l.bad = fmt.Sprintf("%d failed: %s", len(failed), failed[0])
	}
	if nav.LoadEventStart <= 0 && l.bad == "" {
		l.bad = "no load event in the navigation timing"
	}
	return l
}

// quantile is the q-quantile of sorted samples (nearest rank).
func quantile(s []float64, q float64) float64 {
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
