// Command slowstreams measures pab's replay and record proxies under the hostile clients
// of internal/mitm/mitmtest, with the default bounds every command uses (mitm.Limits
// zero): at -conns connections of each kind at once, HTTP/2 connections that grant no
// flow-control window and ask -streams streams each for a 215 KB stylesheet, slow
// HTTP/1.1 request bodies (a byte every 300 ms, plain and in tunnels), HTTP/2 POSTs with
// a content-length and no DATA, and header blocks kept open with empty CONTINUATION
// frames; a normal request is made while they run. Each proxy runs in a child process
// of its own (this program, re-run with -serve), so that its resident memory is its own:
// the child's VmRSS before, and its VmHWM (peak) after, from /proc. It prints a Markdown
// table and, with -out, writes it to a file. It also runs the rapid reset (30,000
// HEADERS+RST_STREAM pairs) against record and counts the requests its site got.
//
//	go run ./bench/slowstreams -out docs/hostile-clients.md
//
// Loopback only; about 2 minutes with the default 30 s bounds.
package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/internal/mitm/mitmtest"
	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/tlsca"
)

const host = "site.bench"

func main() {
	serve := flag.String("serve", "", "internal: serve replay or record in this process")
	dir := flag.String("dir", "", "internal: the work directory the driver made")
	upstream := flag.String("upstream", "", "internal: record's site (host:port of its HTTPS server)")
	conns := flag.Int("conns", 40, "connections of each attack at once")
	streams := flag.Int("streams", 250, "streams per zero-window HTTP/2 connection")
	out := flag.String("out", "", "also write the Markdown report to this file")
	flag.Parse()
	var err error
	if *serve != "" {
		err = serveChild(*serve, *dir, *upstream)
	} else {
		err = drive(*conns, *streams, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowstreams:", err)
		os.Exit(1)
	}
}

// serveChild runs replay or record on 127.0.0.1:0 with the default bounds, prints
// "addr ADDR" and serves until its stdin closes.
func serveChild(mode, dir, upstream string) error {
	ca, err := tlsca.LoadOrCreate(filepath.Join(dir, "ca"))
	if err != nil {
		return err
	}
	var ln net.Listener
	var serve func(net.Listener) error
	var stop func()
	switch mode {
	case "replay":
		b, err := recording.OpenBundle(filepath.Join(dir, "bundle"))
		if err != nil {
			return err
		}
		rs, err := rules.Default()
		if err != nil {
			return err
		}
		s, err := replay.New(replay.Options{Bundle: b, Rules: rs, CA: ca})
		if err != nil {
			return err
		}
		if ln, err = s.Listen("127.0.0.1:0"); err != nil {
			return err
		}
		serve, stop = s.Serve, func() { s.Close() }
	case "record":
		siteCA, err := tlsca.LoadOrCreate(filepath.Join(dir, "site-ca"))
		if err != nil {
			return err
		}
		r, _, err := record.New(record.Options{WorkDir: filepath.Join(dir, "record"), CA: ca, RootCAs: siteCA.CertPool(),
			Resolve: map[string]string{host + ":443": upstream}})
		if err != nil {
			return err
		}
		if ln, err = record.Listen("127.0.0.1:0"); err != nil {
			return err
		}
		serve, stop = r.Serve, func() { r.Shutdown() }
	default:
		return fmt.Errorf("-serve %q: want replay or record", mode)
	}
	go serve(ln)
	fmt.Println("addr", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	stop()
	return nil
}

// child is a proxy in a child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startChild(mode, dir, upstream string) (*child, error) {
	cmd := exec.Command(os.Args[0], "-serve", mode, "-dir", dir, "-upstream", upstream)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("%s child said %q (%v)", mode, line, err)
	}
	return &child{cmd: cmd, stdin: stdin, addr: addr}, nil
}

func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// status is a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func (c *child) status(field string) int64 {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// report is a mitmtest.TB that counts and keeps the failures.
type report struct {
	mu     sync.Mutex
	errors []string
	logs   int
}

func (r *report) Helper() {}
func (r *report) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *report) Logf(string, ...any) {
	r.mu.Lock()
	r.logs++
	r.mu.Unlock()
}

// site is record's upstream: the stylesheet, a page, an upload target; resets counts
// the rapid reset's requests.
type site struct {
	big    []byte
	resets atomic.Int64
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/big.css":
		w.Header().Set("Content-Type", "text/css")
		w.Write(s.big)
	case "/upload":
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "got %d bytes", n)
	case "/reset":
		s.resets.Add(1)
		io.WriteString(w, "reset")
	default:
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<title>page</title>page")
	}
}

func drive(conns, streams int, out string) error {
	dir, err := os.MkdirTemp("", "pab-slowstreams-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := tlsca.LoadOrCreate(filepath.Join(dir, "ca"))
	if err != nil {
		return err
	}
	st := &site{big: []byte(strings.Repeat("body{margin:0}\n", 215000/15))}
	if err := writeBundle(filepath.Join(dir, "bundle"), st.big); err != nil {
		return err
	}
	siteCA, err := tlsca.LoadOrCreate(filepath.Join(dir, "site-ca"))
	if err != nil {
		return err
	}
	leaf, err := siteCA.LeafFor(host)
	if err != nil {
		return err
	}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := &http.Server{Handler: st, ReadHeaderTimeout: 10 * time.Second}
	go up.Serve(tls.NewListener(upLn, &tls.Config{Certificates: []tls.Certificate{*leaf}}))
	defer up.Close()

	// the children run with the zero Limits: these are their defaults
	bounds := mitmtest.Bounds{WriteTimeout: mitm.DefaultWriteTimeout, BodyTimeout: mitm.DefaultBodyTimeout,
		ReadHeaderTimeout: mitm.DefaultReadHeaderTimeout, MinBodyRate: mitm.DefaultMinBodyRate, MaxStreams: mitm.DefaultMaxStreams}
	var b strings.Builder
	fmt.Fprintf(&b, "| proxy | connections of each attack | zero-window streams | RSS before | peak RSS (VmHWM) | probe | bounds held | took |\n|---|---|---|---|---|---|---|---|\n")
	var resetLine string
	for _, mode := range []string{"replay", "record"} {
		c, err := startChild(mode, dir, upLn.Addr().String())
		if err != nil {
			return err
		}
		p := mitmtest.Proxy{Addr: c.addr, Roots: ca.CertPool()}
		client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: c.addr}),
			TLSClientConfig: &tls.Config{RootCAs: ca.CertPool()}, ForceAttemptHTTP2: true}}
		probeURL := "https://" + host + "/"
		var probeMs []string
		probe := func() error {
			start := time.Now()
			resp, err := client.Get(probeURL)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			probeMs = append(probeMs, fmt.Sprintf("%d %v", resp.StatusCode, time.Since(start).Round(time.Millisecond)))
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
		before := c.status("VmRSS")
		rep := &report{}
		start := time.Now()
		mitmtest.CheckTimeBounds(rep, p, bounds, mitmtest.Targets{Host: host, BigPath: "/big.css", PostPath: "/upload",
			PlainPost: "http://" + host + "/upload"}, conns, streams, probe)
		took := time.Since(start)
		peak := c.status("VmHWM")
		held := "yes"
		if len(rep.errors) > 0 {
			held = fmt.Sprintf("no: %d failures, first: %s", len(rep.errors), rep.errors[0])
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d MiB | %d MiB | %s | %s | %v |\n", mode, conns, conns*streams, before>>20, peak>>20,
			strings.Join(probeMs, ", "), held, took.Round(time.Second))
		fmt.Fprintf(os.Stderr, "%s: peak %d MiB, %d failures\n", mode, peak>>20, len(rep.errors))
		for i, e := range rep.errors {
			if i == 20 {
				break
			}
			fmt.Fprintln(os.Stderr, "  ", e)
		}
		if mode == "record" {
			rstart := time.Now()
			sent, goAway, err := p.RapidReset(host, "/reset", 30000, 60*time.Second)
			if err != nil {
				return err
			}
			time.Sleep(3 * time.Second) // the held handlers end with the connection
			life := time.Since(rstart)
			ga := "none"
			if goAway != nil {
				ga = goAway.String()
			}
			resetLine = fmt.Sprintf("Rapid reset through record: %d HEADERS+RST_STREAM pairs sent, GOAWAY %s, %d of them reached the site in %v (bound %d + %d/s: %d).\n",
				sent, ga, st.resets.Load(), life.Round(100*time.Millisecond), mitm.DefaultRequestBurst, mitm.DefaultRequestRate,
				mitm.DefaultRequestBurst+int(mitm.DefaultRequestRate*life.Seconds()))
		}
		c.stop()
	}
	b.WriteString("\n" + resetLine)
	fmt.Print(b.String())
	if out != "" {
		doc := "# Hostile clients: replay and record under slow streams\n\n" +
			"Written by `go run ./bench/slowstreams` (bench/README.md) on " + time.Now().UTC().Format("2006-01-02") +
			", with the default bounds of docs/replay.md \"Connections\" (30 s each). Each proxy runs in a child process; RSS is its own, from /proc.\n\n" + b.String()
		return os.WriteFile(out, []byte(doc), 0o644)
	}
	return nil
}

// writeBundle writes the recording replay serves: the page, the stylesheet.
func writeBundle(dir string, css []byte) error {
	w, err := recording.NewBundleWriter(dir, recording.Manifest{TaskID: "slowstreams", Locale: "en-US", Timezone: "UTC"})
	if err != nil {
		return err
	}
	date := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, x := range []recording.Exchange{
		{Method: "GET", URL: "https://" + host + "/", Date: date, Status: 200, Proto: "HTTP/1.1", ResourceType: "document",
			ReqHeader: http.Header{"Accept": {"text/html"}}, RespHeader: http.Header{"Content-Type": {"text/html"}},
			Body: []byte("<title>page</title>page")},
		{Method: "GET", URL: "https://" + host + "/big.css", Date: date, Status: 200, Proto: "HTTP/1.1", ResourceType: "stylesheet",
			ReqHeader: http.Header{"Accept": {"text/css"}}, RespHeader: http.Header{"Content-Type": {"text/css"}}, Body: css},
	} {
		if _, err := w.Add(x); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}
