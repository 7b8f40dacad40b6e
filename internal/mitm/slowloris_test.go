package mitm

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/tlsca"
)

// helperEnv makes the test binary serve a shell instead of running tests (the
// helper-process pattern): TestHelperShell reads its CA directory and timeouts from it.
const helperEnv = "PAB_MITM_HELPER_SHELL"

// TestHelperShell is not a test: run by TestSlowClientsBounded in a child process
// (PAB_MITM_HELPER_SHELL=CADIR,READHEADER,HANDSHAKE), it serves a shell on 127.0.0.1:0,
// prints "addr ADDR" and serves until its stdin closes.
func TestHelperShell(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process for TestSlowClientsBounded")
	}
	parts := strings.Split(spec, ",")
	ca, err := tlsca.LoadOrCreate(parts[0])
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	rht, _ := time.ParseDuration(parts[1])
	hst, _ := time.ParseDuration(parts[2])
	s, err := New(Config{Handler: &testHandler{release: make(chan struct{})}, CA: ca, HTTP2: true,
		ReadHeaderTimeout: rht, HandshakeTimeout: hst})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	go s.Serve(ln)
	fmt.Println("addr", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	os.Exit(0)
}

// vmHWM is the peak resident set size of process pid, in bytes (VmHWM in
// /proc/PID/status).
func vmHWM(t testing.TB, pid int) int64 {
	t.Helper()
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("no /proc/%d/status: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q", v)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// slowResult is when one slow client's connection was closed by the server. The server
// starts its clock between the client's before and after times: from before, the close
// cannot come earlier than the timeout; from after, it must come within the slack.
type slowResult struct {
	kind          string
	before, after time.Time // around the step that starts the server's clock
	closed        time.Time
	err           error // the client could not even start
}

// TestSlowClientsBounded proves the header and handshake timeouts bound slow clients,
// and that they cost little memory: against a shell in a child process (ReadHeaderTimeout
// 1 s, HandshakeTimeout 2 s), 300 slowloris clients on the listening socket (one header
// byte every 100 ms), 300 slowloris tunnels (CONNECT, TLS handshake, then one header byte
// every 100 ms) and 300 tunnels that never send a ClientHello (100 of each under the race
// detector, whose child is several times slower), set up 64 at a time and then all
// dribbling at once, are each closed by the server no earlier than its timeout and no
// later than it plus 2 s; meanwhile the proxy answers a normal request, and the child's
// peak RSS (VmHWM) stays under 200 MB. (Run again if it failed while the process
// stalled: see testtool.RetryStalled.)
func TestSlowClientsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("hundreds of connections")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc to read the child's RSS from: %v", err)
	}
	testtool.RetryStalled(t, slowClientsBounded)
}

// slowClientsBounded is one attempt of TestSlowClientsBounded.
func slowClientsBounded(t testtool.Attempt) {
	n := 300
	if raceEnabled {
		n = 100 // the race-instrumented child is several times slower
	}
	const (
		rht    = time.Second     // ReadHeaderTimeout
		hst    = 2 * time.Second // HandshakeTimeout: the set-up's handshakes run under it too
		slack  = 2 * time.Second
		maxRSS = 200 << 20
	)
	caDir := t.TempDir()
	ca, err := tlsca.LoadOrCreate(caDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperShell$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+caDir+","+rht.String()+","+hst.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	pid := cmd.Process.Pid
	base := vmHWM(t, pid)

	results := make(chan slowResult, 3*n)
	var wg sync.WaitGroup
	stop := make(chan struct{}) // ends the byte dribbles of clients the server did not close
	defer close(stop)

	// dribble writes one byte of req every 100 ms until c is closed, and reports when.
	var open, peakOpen atomic.Int32 // clients in their slow phase
	slowPhase := func() func() {
		n := open.Add(1)
		for {
			p := peakOpen.Load()
			if n <= p || peakOpen.CompareAndSwap(p, n) {
				break
			}
		}
		return func() { open.Add(-1) }
	}
	dribble := func(kind string, c net.Conn, before, after time.Time) {
		defer slowPhase()()
		req := []byte("GET http://slow.test/ HTTP/1.1\r\nHost: slow.test\r\nX-Slow: " + strings.Repeat("s", 200))
		closed := make(chan time.Time, 1)
		go func() {
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			closed <- time.Now()
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case end := <-closed:
				results <- slowResult{kind: kind, before: before, after: after, closed: end}
				return
			case <-stop:
				return
			case <-tick.C:
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write(req[i%len(req) : i%len(req)+1])
			}
		}
	}
	connect := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return nil, nil, err
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT slow.test:443 HTTP/1.1\r\nHost: slow.test:443\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("CONNECT: %s", resp.Status)
		}
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		c.SetDeadline(time.Time{})
		return c, br, nil
	}
	// Connections are set up (dial, CONNECT, handshake) 64 at a time, so that the set-up
	// itself, which runs under the same bounds, is not what overloads the child: the slow
	// phases, a second or more each, still overlap.
	setup := make(chan struct{}, 64)
	for i := range 3 * n {
		wg.Go(func() {
			setup <- struct{}{}
			released := false
			release := func() {
				if !released {
					released = true
					<-setup
				}
			}
			defer release()
			switch i % 3 {
			case 0: // slowloris on the listening socket: the clock starts at accept
				before := time.Now()
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				release()
				if err != nil {
					results <- slowResult{kind: "listener", err: err}
					return
				}
				defer c.Close()
				dribble("listener", c, before, time.Now())
			case 1: // slowloris inside a tunnel
				c, br, err := connect()
				if err != nil {
					results <- slowResult{kind: "tunnel", err: err}
					return
				}
				defer c.Close()
				tc := tls.Client(&readerConn{Conn: c, r: br}, &tls.Config{RootCAs: ca.CertPool(), ServerName: "slow.test", NextProtos: []string{"http/1.1"}})
				tc.SetDeadline(time.Now().Add(20 * time.Second))
				before := time.Now() // the clock starts once the server's handshake is done
				err = tc.Handshake()
				release()
				if err != nil {
					results <- slowResult{kind: "tunnel", err: err}
					return
				}
				tc.SetDeadline(time.Time{})
				dribble("tunnel", tc, before, time.Now())
			case 2: // CONNECT, then no ClientHello: the clock starts at the 200
				before := time.Now()
				c, _, err := connect()
				release()
				if err != nil {
					results <- slowResult{kind: "no hello", err: err}
					return
				}
				defer c.Close()
				defer slowPhase()()
				after := time.Now()
				c.SetReadDeadline(after.Add(hst + 10*time.Second))
				c.Read(make([]byte, 1))
				results <- slowResult{kind: "no hello", before: before, after: after, closed: time.Now()}
			}
		})
	}
	// the proxy answers while they dribble
	time.Sleep(300 * time.Millisecond)
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}}
	resp, err := cl.Get("http://alive.test/")
	if err != nil {
		t.Errorf("the proxy does not answer while %d slow clients are connected: %v", 3*n, err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(body, []byte("ok GET http://alive.test/")) {
			t.Errorf("answer while slow clients are connected: %d %q", resp.StatusCode, body)
		}
	}
	wg.Wait()
	close(results)
	count := map[string]int{}
	var worst = map[string]time.Duration{}
	for r := range results {
		count[r.kind]++
		timeout := rht
		if r.kind == "no hello" {
			timeout = hst
		}
		switch {
		case r.err != nil:
			t.Errorf("%s client: %v", r.kind, r.err)
		case r.closed.Sub(r.before) < timeout:
			t.Errorf("%s client closed %v after it started, before the timeout %v", r.kind, r.closed.Sub(r.before), timeout)
		case r.closed.Sub(r.after) > timeout+slack:
			t.Errorf("%s client closed %v after its slow phase began, timeout %v", r.kind, r.closed.Sub(r.after), timeout)
		}
		worst[r.kind] = max(worst[r.kind], r.closed.Sub(r.after))
	}
	if count["listener"] != n || count["tunnel"] != n || count["no hello"] != n {
		t.Errorf("results %v, want %d of each", count, n)
	}
	if p := int(peakOpen.Load()); p < n {
		t.Errorf("at most %d slow clients at once: the test did not load the child", p)
	}
	peak := vmHWM(t, pid)
	t.Logf("slowest closes %v; %d slow clients at once; child VmHWM %d MiB (at start %d MiB)", worst, peakOpen.Load(), peak>>20, base>>20)
	if peak > maxRSS {
		t.Errorf("child peak RSS %d MiB with %d slow clients, want under %d MiB", peak>>20, 3*n, maxRSS>>20)
	}
}
