// Command load is the load generator of pab's benchmarks (bench/README.md). It has two
// modes.
//
// Load (the default) sends GET requests for the URLs of a cycle file (bench/gen's
// cycle.tsv) through an HTTP proxy, from -c workers, each with one request in flight and
// its own keep-alive connections (one CONNECT tunnel per host for https), for -d after a
// -warmup, and prints one JSON object (Result) on stdout. With -rate, requests are paced at
// that total rate instead of sent as fast as answered, to measure the latency a proxy adds
// when it is not saturated:
//
//	load -proxy 127.0.0.1:8899 -ca ca.pem -cycle cycle.tsv -c 16 -d 10s [-scheme http] [-watch PID]
//
// HTTPS is forced to HTTP/1.1 inside the tunnel and to TLS 1.3 with X25519 only, so every
// proxy negotiates the same protocol, cipher and key exchange. With -proto h2, each worker
// offers h2 (and http/1.1) by ALPN instead and runs -streams requests at once over its one
// connection to a host (one CONNECT tunnel; the transport never opens a second one while
// the server allows that many streams); -host keeps only the cycle's URLs of one host, so
// that a worker has exactly one connection:
//
//	load -proxy 127.0.0.1:8899 -ca ca.pem -cycle cycle.tsv -host static.bench.test -proto h2 -c 1 -streams 16
//
// The protocol of every timed answer is counted (Result.ProtoSeen), so an h2 run that the
// proxy answered over HTTP/1.1 shows as such. Every answer's status and
// length are checked, and the SHA-256 of every -verify-every'th body, so a proxy that
// answers wrong is counted (Result.Mismatches) rather than measured. With -watch PID, the
// CPU time and peak RSS of that process and all its descendants are measured over the
// timed window.
//
// Start (-mode start) runs the command after "--", waits for its first correctly answered
// request of -url through the proxy, and prints the seconds from launch to that answer,
// then stops the command. The proxy address is -proxy, or, when -proxy is empty, the first
// "http://HOST:PORT" the command prints on stderr (pab replay --listen 127.0.0.1:0).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pab-dev/pab/bench/proctree"
	"github.com/pab-dev/pab/internal/procgroup"
)

// target is one URL of the cycle with what its answer must be.
type target struct {
	url    string
	size   int64
	sha256 string
}

// Result is the printed outcome of a load run. Latencies are in milliseconds, measured
// from sending the request to reading the last byte of the body.
type Result struct {
	Kind   string `json:"kind"` // "load"
	Label  string `json:"label"`
	Rep    int    `json:"rep"`
	Scheme string `json:"scheme"`
	Conns  int    `json:"conns"`
	// Proto is the protocol asked for inside the tunnel: h1 or h2; Streams the requests
	// in flight per worker (1 for h1); Host the one host kept with -host (empty: all).
	Proto   string `json:"proto"`
	Streams int    `json:"streams"`
	Host    string `json:"host,omitempty"`
	// ProtoSeen is the protocol of the timed answers: "h2", "http/1.1", or both with counts.
	ProtoSeen  string  `json:"proto_seen"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate,omitempty"` // the paced rate asked for (-rate), 0 when unpaced
	Requests   int64   `json:"requests"`
	RPS        float64 `json:"rps"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	P999       float64 `json:"p999_ms"`
	Max        float64 `json:"max_ms"`
	Errors     int64   `json:"errors"`
	Mismatches int64   `json:"mismatches"`
	Verified   int64   `json:"verified"`
	FirstError string  `json:"first_error,omitempty"`
	// CPUms is the CPU time (user+system) of the watched process tree over the timed
	// window; CPUPerReq divides it by Requests; Cores is CPUms over the window's length.
	CPUms     float64 `json:"cpu_ms,omitempty"`
	CPUPerReq float64 `json:"cpu_ms_per_req,omitempty"`
	Cores     float64 `json:"cores,omitempty"`
	PeakRSSMB float64 `json:"peak_rss_mb,omitempty"`
	// NewConns counts TCP connections the client opened in the timed window.
	NewConns int64 `json:"new_conns"`
}

func main() {
	mode := flag.String("mode", "load", "load or start")
	proxy := flag.String("proxy", "", "proxy address host:port")
	caFile := flag.String("ca", "", "PEM file of the CA the proxy signs with")
	cycleFile := flag.String("cycle", "", "cycle.tsv of bench/gen")
	scheme := flag.String("scheme", "https", "https or http: the scheme requested")
	conns := flag.Int("c", 16, "concurrent workers (connections)")
	dur := flag.Duration("d", 10*time.Second, "timed duration")
	warm := flag.Duration("warmup", 2*time.Second, "warmup before timing")
	verifyEvery := flag.Int("verify-every", 10, "check the SHA-256 of every Nth body (1: all)")
	label := flag.String("label", "", "label copied into the result (the peer's name)")
	rep := flag.Int("rep", 0, "repetition number copied into the result")
	watch := flag.Int("watch", 0, "PID whose process tree's CPU and RSS are measured")
	rate := flag.Float64("rate", 0, "load mode: total requests per second, paced evenly over the workers (0: as fast as answered)")
	proto := flag.String("proto", "h1", "load mode: protocol inside the tunnel, h1 (HTTP/1.1 only) or h2 (h2 offered by ALPN, streams multiplexed)")
	streams := flag.Int("streams", 1, "load mode with -proto h2: requests in flight at once per worker, sharing its one connection")
	host := flag.String("host", "", "load mode: keep only the cycle's URLs of this host (one connection per worker)")
	startURL := flag.String("url", "", "start mode: the URL to request")
	startSHA := flag.String("sha256", "", "start mode: the expected body SHA-256 (hex)")
	timeout := flag.Duration("timeout", 60*time.Second, "start mode: give up after this long")
	atStart := flag.String("at-start", "", "load mode: a shell command run (and waited for) as the timed window starts, after the warmup (bench/instructions.sh turns callgrind's counting on with it)")
	atEnd := flag.String("at-end", "", "load mode: a shell command run (and waited for) as the timed window ends")
	flag.Parse()
	var err error
	switch *mode {
	case "load":
		err = runLoad(loadSpec{proxy: *proxy, caFile: *caFile, cycleFile: *cycleFile, scheme: *scheme, conns: *conns, dur: *dur,
			warm: *warm, verifyEvery: *verifyEvery, label: *label, rep: *rep, watch: *watch, rate: *rate, proto: *proto,
			streams: *streams, host: *host, atStart: *atStart, atEnd: *atEnd})
	case "start":
		err = runStart(*proxy, *caFile, *startURL, *startSHA, *label, *rep, *timeout, flag.Args())
	default:
		err = fmt.Errorf("load: -mode %q: want load or start", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func readCycle(path, scheme, host string) ([]target, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []target
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			return nil, fmt.Errorf("%s line %d: want 6 tab-separated fields", path, i+1)
		}
		size, err := strconv.ParseInt(f[5], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: size %q", path, i+1, f[5])
		}
		u := f[0]
		if host != "" {
			pu, err := url.Parse(u)
			if err != nil || pu.Host != host {
				continue
			}
		}
		if scheme == "http" {
			u = "http://" + strings.TrimPrefix(u, "https://")
		}
		out = append(out, target{url: u, size: size, sha256: f[4]})
	}
	if len(out) == 0 {
		if host != "" {
			return nil, fmt.Errorf("%s: no URLs of host %s", path, host)
		}
		return nil, fmt.Errorf("%s: no URLs", path)
	}
	return out, nil
}

// newTransport is one worker's client: TLS 1.3 with X25519 only, keep-alive; HTTP/1.1 for
// proto h1; for h2, h2 offered first by ALPN and up to streams requests multiplexed over one
// connection per host (StrictMaxConcurrentRequests: never a second connection while the
// server allows that many streams).
func newTransport(proxy, caFile string, opened *atomic.Int64, proto string, streams int) (*http.Transport, error) {
	pu, err := url.Parse("http://" + proxy)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
	}
	dialer := &netDialer{opened: opened}
	tr := &http.Transport{
		Proxy:       http.ProxyURL(pu),
		DialContext: dialer.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13,
			CurvePreferences: []tls.CurveID{tls.X25519}, NextProtos: []string{"http/1.1"}},
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if proto == "h2" {
		tr.TLSClientConfig.NextProtos = []string{"h2", "http/1.1"}
		tr.ForceAttemptHTTP2 = true
		tr.TLSNextProto = nil
		tr.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
		// A proxy that answers http/1.1 to the offer gets keep-alive connections, one per
		// stream, rather than a new connection per request.
		tr.MaxIdleConnsPerHost = streams
	}
	return tr, nil
}

// loadSpec is what a load run is asked to do (the flags of load mode).
type loadSpec struct {
	proxy, caFile, cycleFile, scheme string
	conns                            int
	dur, warm                        time.Duration
	verifyEvery                      int
	label                            string
	rep, watch                       int
	rate                             float64
	proto                            string
	streams                          int
	host                             string
	atStart, atEnd                   string // shell commands run at the timed window's start and end, or ""
}

func runLoad(sp loadSpec) error {
	if err := sp.check(); err != nil {
		return err
	}
	targets, err := readCycle(sp.cycleFile, sp.scheme, sp.host)
	if err != nil {
		return err
	}
	lr := &loadRun{sp: sp, targets: targets}
	clients, err := lr.clients()
	for _, c := range clients {
		defer c.Transport.(*http.Transport).CloseIdleConnections()
	}
	if err != nil {
		return err
	}
	goroutines := sp.conns * sp.streams
	for w := 0; w < goroutines; w++ {
		lr.wg.Add(1)
		go lr.worker(w, goroutines, clients[w/sp.streams])
	}
	time.Sleep(sp.warm)
	// before the CPU count: the peer goes on answering while the hook runs
	if err := runHook("-at-start", sp.atStart); err != nil {
		return err
	}
	var cpu0 float64
	var peak atomic.Int64
	watchDone := make(chan struct{})
	if sp.watch > 0 {
		cpu0, _ = proctree.Stats(sp.watch)
		go samplePeak(sp.watch, &peak, watchDone)
	}
	opened0 := lr.opened.Load()
	lr.timing.Store(true)
	t0 := time.Now()
	time.Sleep(sp.dur)
	lr.timing.Store(false)
	elapsed := time.Since(t0)
	var cpu1 float64
	if sp.watch > 0 {
		var rss int64
		cpu1, rss = proctree.Stats(sp.watch)
		if rss > peak.Load() {
			peak.Store(rss)
		}
		close(watchDone)
	}
	// after the CPU count: the peer goes on answering while the hook runs
	if err := runHook("-at-end", sp.atEnd); err != nil {
		return err
	}
	newConns := lr.opened.Load() - opened0
	lr.stop.Store(true)
	lr.wg.Wait()
	r := lr.result(elapsed, newConns)
	if sp.watch > 0 {
		r.CPUms = (cpu1 - cpu0) * 1000
		if r.Requests > 0 {
			r.CPUPerReq = r.CPUms / float64(r.Requests)
		}
		r.Cores = (cpu1 - cpu0) / elapsed.Seconds()
		r.PeakRSSMB = float64(peak.Load()) / (1 << 20)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// check validates the flags of a load run; an error names the flag.
func (sp loadSpec) check() error {
	if sp.proxy == "" || sp.cycleFile == "" {
		return errors.New("-proxy and -cycle are required")
	}
	if sp.scheme != "https" && sp.scheme != "http" {
		return fmt.Errorf("-scheme %q: want https or http", sp.scheme)
	}
	if sp.conns < 1 || sp.conns > 4096 {
		return fmt.Errorf("-c %d: want 1 to 4096", sp.conns)
	}
	switch proto, streams := sp.proto, sp.streams; {
	case proto != "h1" && proto != "h2":
		return fmt.Errorf("-proto %q: want h1 or h2", proto)
	case proto == "h2" && sp.scheme != "https":
		return errors.New("-proto h2 needs -scheme https (h2 is negotiated inside the TLS tunnel)")
	case streams < 1 || streams > 1000:
		return fmt.Errorf("-streams %d: want 1 to 1000", streams)
	case streams > 1 && proto != "h2":
		return errors.New("-streams above 1 needs -proto h2 (an HTTP/1.1 connection carries one request at a time)")
	}
	return nil
}

// loadRun is one load run in progress: the workers' shared counters and latencies.
type loadRun struct {
	sp      loadSpec
	targets []target

	timing, stop                                                 atomic.Bool
	requests, errs, mismatches, verified, opened, h2Seen, h1Seen atomic.Int64

	firstErr sync.Once
	firstMsg string
	mu       sync.Mutex
	lat      []time.Duration
	wg       sync.WaitGroup
}

// note counts a failed request and keeps the first error's text.
func (lr *loadRun) note(err error) {
	lr.errs.Add(1)
	lr.firstErr.Do(func() { lr.firstMsg = err.Error() })
}

// clients makes one client a connection. Each has its own transport (its connections);
// with h2 its streams goroutines share it. An h2 client first sends one request per host
// alone, so that its one connection to the host exists before its streams start. The
// clients made so far are returned with an error too (for their idle connections to be
// closed).
func (lr *loadRun) clients() ([]*http.Client, error) {
	sp := lr.sp
	var hosts []string
	for _, t := range lr.targets {
		if u, err := url.Parse(t.url); err == nil && !slices.Contains(hosts, u.Host) {
			hosts = append(hosts, u.Host)
		}
	}
	var clients []*http.Client
	for range sp.conns {
		tr, err := newTransport(sp.proxy, sp.caFile, &lr.opened, sp.proto, sp.streams)
		if err != nil {
			return clients, err
		}
		c := &http.Client{Transport: tr, Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		clients = append(clients, c)
		if sp.proto == "h2" {
			for _, h := range hosts {
				for _, t := range lr.targets {
					if strings.Contains(t.url, "://"+h+"/") {
						if resp, err := c.Get(t.url); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
						break
					}
				}
			}
		}
	}
	return clients, nil
}

// worker w of goroutines sends requests through client until the run stops, checking
// every answer's status and size (and every verifyEvery-th body's sha256), and keeps the
// latencies of the timed window.
func (lr *loadRun) worker(w, goroutines int, client *http.Client) {
	defer lr.wg.Done()
	rate, verifyEvery, targets := lr.sp.rate, lr.sp.verifyEvery, lr.targets
	local := make([]time.Duration, 0, 1<<14)
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var interval time.Duration
	next := time.Now()
	if rate > 0 {
		interval = time.Duration(float64(goroutines) / rate * float64(time.Second))
		next = next.Add(interval * time.Duration(w) / time.Duration(goroutines))
	}
	for i := w * 7919; !lr.stop.Load(); i++ {
		t := targets[i%len(targets)]
		t0 := time.Now()
		if rate > 0 {
			// Paced: latency counts from the scheduled send time, so a proxy that
			// falls behind is charged for the wait (no coordinated omission).
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			t0 = next
			next = next.Add(interval)
		}
		resp, err := client.Get(t.url)
		if err != nil {
			lr.note(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		check := verifyEvery > 0 && i%verifyEvery == 0
		var n int64
		if check {
			h.Reset()
			n, err = io.CopyBuffer(h, resp.Body, buf)
		} else {
			n, err = io.CopyBuffer(io.Discard, resp.Body, buf)
		}
		resp.Body.Close()
		d := time.Since(t0)
		if !lr.timing.Load() {
			continue
		}
		switch {
		case err != nil:
			lr.note(err)
			continue
		case resp.StatusCode != 200 || n != t.size:
			lr.mismatches.Add(1)
			lr.firstErr.Do(func() {
				lr.firstMsg = fmt.Sprintf("%s: status %d, %d bytes, want 200 and %d", t.url, resp.StatusCode, n, t.size)
			})
		case check:
			lr.verified.Add(1)
			if hex.EncodeToString(h.Sum(nil)) != t.sha256 {
				lr.mismatches.Add(1)
				lr.firstErr.Do(func() { lr.firstMsg = t.url + ": body differs from the recording" })
			}
		}
		if resp.ProtoMajor == 2 {
			lr.h2Seen.Add(1)
		} else {
			lr.h1Seen.Add(1)
		}
		lr.requests.Add(1)
		local = append(local, d)
	}
	lr.mu.Lock()
	lr.lat = append(lr.lat, local...)
	lr.mu.Unlock()
}

// samplePeak keeps in peak the largest RSS of the process tree of pid, sampled every
// 100 ms until done is closed.
func samplePeak(pid int, peak *atomic.Int64, done <-chan struct{}) {
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			if _, rss := proctree.Stats(pid); rss > peak.Load() {
				peak.Store(rss)
			}
		}
	}
}

// result is the run's Result without the CPU and RSS figures: counts, rates, latency
// percentiles and the protocol the answers came over.
func (lr *loadRun) result(elapsed time.Duration, newConns int64) Result {
	sp := lr.sp
	lat := lr.lat
	slices.Sort(lat)
	r := Result{Kind: "load", Rate: sp.rate, Label: sp.label, Rep: sp.rep, Scheme: sp.scheme, Conns: sp.conns, Proto: sp.proto, Streams: sp.streams, Host: sp.host,
		Seconds: elapsed.Seconds(), Requests: lr.requests.Load(),
		Errors: lr.errs.Load(), Mismatches: lr.mismatches.Load(), Verified: lr.verified.Load(), FirstError: lr.firstMsg, NewConns: newConns}
	switch n2, n1 := lr.h2Seen.Load(), lr.h1Seen.Load(); {
	case n2 > 0 && n1 > 0:
		r.ProtoSeen = fmt.Sprintf("mixed: h2 %d, http/1.1 %d", n2, n1)
	case n2 > 0:
		r.ProtoSeen = "h2"
	case n1 > 0:
		r.ProtoSeen = "http/1.1"
	}
	r.RPS = float64(r.Requests) / elapsed.Seconds()
	r.P50, r.P99, r.P999 = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 0.999)
	if len(lat) > 0 {
		r.Max = ms(lat[len(lat)-1])
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the q-quantile of sorted samples (nearest rank), in milliseconds.
func pct(s []time.Duration, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.5) - 1
	return ms(s[min(max(i, 0), len(s)-1)])
}

var addrPattern = regexp.MustCompile(`http://(127\.0\.0\.1:[0-9]+)`)

// runStart launches argv and measures the time to its first correct answer of rawURL.
func runStart(proxy, caFile, rawURL, wantSHA, label string, rep int, timeout time.Duration, argv []string) error {
	if len(argv) == 0 || rawURL == "" {
		return errors.New("start mode needs -url and a command after --")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	procgroup.Set(cmd, true)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = io.Discard
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		procgroup.Stop(cmd.Process.Pid, done, 5*time.Second)
	}()
	addrCh := make(chan string, 1)
	var errText bytes.Buffer
	var errMu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			errMu.Lock()
			if errText.Len() < 4096 {
				errText.WriteString(sc.Text() + "\n")
			}
			errMu.Unlock()
			if m := addrPattern.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addrCh <- m[1]
				sent = true
			}
		}
	}()
	var listened time.Duration // when the command printed its address (0: -proxy given)
	if proxy == "" {
		select {
		case proxy = <-addrCh:
			listened = time.Since(t0)
		case <-ctx.Done():
			errMu.Lock()
			defer errMu.Unlock()
			return fmt.Errorf("no proxy address on the command's stderr within %s:\n%s", timeout, errText.String())
		}
	}
	var opened atomic.Int64
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("no correct answer from %s within %s", proxy, timeout)
		}
		tr, err := newTransport(proxy, caFile, &opened, "h1", 1)
		if err != nil {
			return err
		}
		client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		sent := time.Now()
		resp, err := client.Get(rawURL)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			sum := sha256.Sum256(body)
			if rerr == nil && resp.StatusCode == 200 && (wantSHA == "" || hex.EncodeToString(sum[:]) == wantSHA) {
				el := time.Since(t0)
				tr.CloseIdleConnections()
				// seconds: launch to the correct answer; listen_seconds: launch to the
				// address on stderr; first_request_seconds: the answering request alone
				// (CONNECT, TLS handshake, request and body)
				// rss_bytes and cpu_seconds: the command's process tree right after that
				// answer (what a start costs, bench/scale.sh)
				cpu, rss := proctree.Stats(cmd.Process.Pid)
				json.NewEncoder(os.Stdout).Encode(map[string]any{"kind": "start", "label": label, "rep": rep, "seconds": el.Seconds(),
					"listen_seconds": listened.Seconds(), "first_request_seconds": time.Since(sent).Seconds(),
					"rss_bytes": rss, "cpu_seconds": cpu})
				return nil
			}
			if resp.StatusCode == 200 {
				return fmt.Errorf("%s answered a body that differs from the recording", rawURL)
			}
		}
		tr.CloseIdleConnections()
		time.Sleep(2 * time.Millisecond)
	}
}

// netDialer counts the TCP connections the client opens.
type netDialer struct {
	d      net.Dialer
	opened *atomic.Int64
}

func (nd *netDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := nd.d.DialContext(ctx, network, addr)
	if err == nil {
		nd.opened.Add(1)
	}
	return c, err
}

// runHook runs the shell command cmd of the flag named flagName (none when cmd is ""),
// with its output on stderr; an error names the flag.
func runHook(flagName, cmd string) error {
	if cmd == "" {
		return nil
	}
	c := exec.Command("sh", "-c", cmd)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("load: %s %q: %w", flagName, cmd, err)
	}
	return nil
}
