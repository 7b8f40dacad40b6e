package gate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pab-dev/pab/guard/netpolicy"
	"github.com/pab-dev/pab/internal/mitm"
)

func TestStartErrors(t *testing.T) {
	pca, _ := testCAs(t)
	p := netpolicy.New(netpolicy.ModeFillAndReview, nil, nil)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{CA: pca}, "gate: no policy"},
		{Options{Policy: p}, "gate: no CA"},
		{Options{Policy: p, CA: pca, Upstream: "127.0.0.1"}, `gate: upstream "127.0.0.1": want host:port`},
		{Options{Policy: p, CA: pca, Upstream: ":8080"}, `gate: upstream ":8080": want host:port`},
	} {
		g, err := Start(c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("Start(%+v) = %v, %v; want error %q", c.o, g, err, c.want)
		}
		if g != nil {
			g.Close()
		}
	}
}

// A GET passes, over a tunnel and as a plain-HTTP proxy request, with the URL as sent and
// the proxy's own fields removed; a request made to the gate itself gets a 400.
func TestGetPasses(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)
	c := r.client(false)
	a := do(t, c, newReq(t, "GET", "https://"+siteHost+"/page?a=1;b=2&x=%2F", nil,
		"X-Custom", "kept", "Proxy-Foo", "gone", "Connection", "X-Hop", "X-Hop", "gone",
		"X-Forwarded-For", "10.9.8.7", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"))
	if a.code != 200 || a.body != "ok GET /page body=0" {
		t.Fatalf("tunnel GET: %d %q", a.code, a.body)
	}
	a = do(t, c, newReq(t, "GET", "http://"+siteHost+"/plain", nil, "Proxy-Authorization", "Basic eDp5"))
	if a.code != 200 || a.body != "ok GET /plain body=0" {
		t.Fatalf("plain GET: %d %q", a.code, a.body)
	}
	seen := r.site.requests()
	if len(seen) != 2 {
		t.Fatalf("site saw %d requests, want 2", len(seen))
	}
	if want := "https://" + siteHost + "/page?a=1;b=2&x=%2F"; seen[0].url != want {
		t.Errorf("site saw %s, want %s", seen[0].url, want)
	}
	h := seen[0].header
	if h.Get("X-Custom") != "kept" || h.Get("X-Forwarded-For") != "10.9.8.7" || h.Get("Sec-Fetch-Mode") != "navigate" {
		t.Errorf("end-to-end fields lost: %v", h)
	}
	for _, f := range []string{"Proxy-Foo", "X-Hop", "Proxy-Connection", "X-Forwarded-Host", "Forwarded"} {
		if _, ok := h[f]; ok {
			t.Errorf("site got %s: %v", f, h)
		}
	}
	if seen[1].url != "http://"+siteHost+"/plain" {
		t.Errorf("plain: site saw %s", seen[1].url)
	}
	if _, ok := seen[1].header["Proxy-Authorization"]; ok {
		t.Errorf("plain: site got Proxy-Authorization")
	}
	if r.gate.Forwarded() != 2 || r.gate.Refused() != 0 {
		t.Errorf("forwarded %d refused %d, want 2 and 0", r.gate.Forwarded(), r.gate.Refused())
	}
	resp, err := http.Get("http://" + r.gate.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("direct request: %d, want 400", resp.StatusCode)
	}
}

func TestPostRefusedUnderFillAndReview(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.Arm() // no effect under fill_and_review
	for _, u := range []string{"https://" + siteHost + "/apply", "http://" + siteHost + "/apply"} {
		a := do(t, r.client(false), newReq(t, "POST", u, strings.NewReader("email=x"), "Content-Type", "application/x-www-form-urlencoded"))
		wantRefused(t, "POST "+u, a, netpolicy.ReasonBlocked)
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Errorf("site saw %d requests", n)
	}
	refs := r.lastRefusals()
	if len(refs) != 2 {
		t.Fatalf("%d refusals, want 2", len(refs))
	}
	for _, f := range refs {
		if f.Layer != netpolicy.LayerWire || f.Host != siteHost || f.Method != "POST" || f.Verdict.Reason != netpolicy.ReasonBlocked ||
			f.Verdict.Carrier != netpolicy.CarrierMethod || f.Kind != "" || f.WebSocket || f.Navigation {
			t.Errorf("refusal %+v", f)
		}
	}
	if r.gate.Refused() != 2 || r.gate.Forwarded() != 0 {
		t.Errorf("refused %d forwarded %d", r.gate.Refused(), r.gate.Forwarded())
	}
}

// A GET carrying a value typed in this run, in any encoding and any carrier, is refused
// and the site sees nothing.
func TestTypedValueRefused(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)
	r.policy.AddTyped(typedName)
	c := r.client(false)
	base := "https://" + siteHost
	for _, tc := range []struct {
		name, url string
		hdr       []string
		carrier   string
		nav       bool
	}{
		{"query", base + "/search?q=jane.doe%40example.com", nil, netpolicy.CarrierURL, false},
		{"query, encoded twice", base + "/search?q=jane.doe%2540example.com", nil, netpolicy.CarrierURL, false},
		{"query, other case", base + "/search?q=JANE.DOE%40EXAMPLE.COM", nil, netpolicy.CarrierURL, false},
		{"query, plus-encoded", base + "/search?n=Zephyrine+Quill", nil, netpolicy.CarrierURL, false},
		{"query, plus-encoded, other case, encoded twice", base + "/search?n=zEPHYRINE%252BqUILL", nil, netpolicy.CarrierURL, false},
		{"path", base + "/u/jane.doe@example.com/x", nil, netpolicy.CarrierURL, false},
		{"plain http", "http://" + siteHost + "/t?e=jane.doe%40example.com", nil, netpolicy.CarrierURL, false},
		{"navigation", base + "/next?e=jane.doe%40example.com", []string{"Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}, netpolicy.CarrierURL, true},
		{"iframe", base + "/frame?e=jane.doe%40example.com", []string{"Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "iframe"}, netpolicy.CarrierURL, true},
		{"cookie", base + "/img.png", []string{"Cookie", "sid=abc; e=jane.doe%40example.com"}, netpolicy.CarrierCookie, false},
		{"custom header", base + "/api", []string{"X-Data", "ZEPHYRINE   QUILL"}, netpolicy.CarrierHeader, false},
		{"referer", base + "/api", []string{"Referer", base + "/form?n=Zephyrine%20Quill"}, netpolicy.CarrierHeader, false},
	} {
		for _, method := range []string{"GET", "HEAD"} {
			before := len(r.lastRefusals())
			a := do(t, c, newReq(t, method, tc.url, nil, tc.hdr...))
			if method == "HEAD" {
				if a.code != http.StatusForbidden || a.header.Get(RefusedHeader) != "refused" {
					t.Errorf("%s HEAD: %d", tc.name, a.code)
				}
			} else {
				wantRefused(t, tc.name, a, netpolicy.ReasonByGet)
			}
			refs := r.lastRefusals()
			if len(refs) != before+1 {
				t.Fatalf("%s: %d refusals, want %d", tc.name, len(refs), before+1)
			}
			f := refs[before]
			if f.Layer != netpolicy.LayerWire || f.Verdict.Reason != netpolicy.ReasonByGet || f.Verdict.Carrier != tc.carrier ||
				f.Host != siteHost || f.Method != method || f.Navigation != tc.nav || f.WebSocket {
				t.Errorf("%s %s: refusal %+v", tc.name, method, f)
			}
		}
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Errorf("site saw %d requests", n)
	}
	// the same requests without the values pass
	if a := do(t, c, newReq(t, "GET", base+"/search?q=john", nil, "Cookie", "sid=abc")); a.code != 200 {
		t.Errorf("clean GET: %d %q", a.code, a.body)
	}
}

func TestFormActionRefused(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddForms([]netpolicy.Form{{Action: "https://" + siteHost + "/apply", Method: "post", Fields: []string{"email", "cover_letter"}}})
	c := r.client(false)
	a := do(t, c, newReq(t, "GET", "https://"+siteHost+"/apply?cover_letter=anything", nil))
	wantRefused(t, "GET to the form's action", a, netpolicy.ReasonByGet)
	if refs := r.lastRefusals(); len(refs) != 1 || refs[0].Verdict.Carrier != netpolicy.CarrierFormAction {
		t.Errorf("refusals %+v", refs)
	}
	if a := do(t, c, newReq(t, "GET", "https://"+siteHost+"/apply?page=2", nil)); a.code != 200 {
		t.Errorf("GET to the action without a field: %d", a.code)
	}
	if n := r.site.hits.Load(); n != 1 {
		t.Errorf("site saw %d requests, want 1", n)
	}
}

// Under auto_submit an armed Policy lets exactly one POST to the application's site pass
// the wire; a POST elsewhere is refused even when armed; Release lets everything pass.
func TestAutoSubmitArmAndRelease(t *testing.T) {
	r := newRig(t, netpolicy.ModeAutoSubmit)
	c := r.client(false)
	post := func(host string) answer {
		return do(t, c, newReq(t, "POST", "https://"+host+"/apply", strings.NewReader("email=jane"), "Content-Type", "application/x-www-form-urlencoded"))
	}
	wantRefused(t, "POST before Arm", post(siteHost), netpolicy.ReasonBlocked)
	r.policy.Arm()
	wantRefused(t, "armed POST to another host", post(otherHost), netpolicy.ReasonBlocked)
	if a := post(siteHost); a.code != 200 || a.body != "ok POST /apply body=10" {
		t.Fatalf("armed POST: %d %q", a.code, a.body)
	}
	wantRefused(t, "second POST", post(siteHost), netpolicy.ReasonBlocked)
	if n := r.site.hits.Load(); n != 1 {
		t.Errorf("site saw %d requests, want 1", n)
	}
	r.policy.Release()
	if a := post(otherHost); a.code != 200 {
		t.Errorf("released POST: %d %q", a.code, a.body)
	}
	if n := r.site.hits.Load(); n != 2 {
		t.Errorf("site saw %d requests, want 2", n)
	}
	if r.gate.Refused() != 3 || r.gate.Forwarded() != 2 {
		t.Errorf("refused %d forwarded %d, want 3 and 2", r.gate.Refused(), r.gate.Forwarded())
	}
}

// HTTP/2 inside the tunnel (client to gate) and to the site (gate to site), allowed and
// refused.
func TestHTTP2(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)
	c := r.client(true)
	a := do(t, c, newReq(t, "GET", "https://"+siteHost+"/h2", nil))
	if a.code != 200 || a.proto != 2 || a.body != "ok GET /h2 body=0" {
		t.Fatalf("h2 GET: %d HTTP/%d %q", a.code, a.proto, a.body)
	}
	if seen := r.site.requests(); len(seen) != 1 || seen[0].proto != 2 {
		t.Errorf("site saw %+v, want one HTTP/2 request", seen)
	}
	a = do(t, c, newReq(t, "GET", "https://"+siteHost+"/h2?e=jane.doe%40example.com", nil))
	if a.proto != 2 {
		t.Errorf("refused over HTTP/%d", a.proto)
	}
	wantRefused(t, "h2 GET with a typed value", a, netpolicy.ReasonByGet)
	a = do(t, c, newReq(t, "POST", "https://"+siteHost+"/h2", strings.NewReader("x")))
	wantRefused(t, "h2 POST", a, netpolicy.ReasonBlocked)
	if n := r.site.hits.Load(); n != 1 {
		t.Errorf("site saw %d requests, want 1", n)
	}
}

// The gate chained to an upstream MITM proxy (built on internal/mitm with the same CA, as
// pab replay and pab record are): allowed requests reach it and its answers come back;
// refused ones never reach it.
func TestChainedUpstream(t *testing.T) {
	pca, _ := testCAs(t)
	var upHits atomic.Int64
	var upMu sync.Mutex
	var upSeen []string
	up, err := mitm.New(mitm.Config{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			upHits.Add(1)
			upMu.Lock()
			upSeen = append(upSeen, r.Method+" "+r.URL.String())
			upMu.Unlock()
			fmt.Fprintf(w, "upstream %s %s", r.Method, r.URL)
		}),
		CA:    pca,
		HTTP2: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := mitm.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- up.Serve(ln) }()
	t.Cleanup(func() {
		up.Close()
		if err := <-done; err != nil {
			t.Errorf("upstream serve: %v", err)
		}
	})

	r := newRig(t, netpolicy.ModeFillAndReview, func(o *Options) {
		o.Upstream = ln.Addr().String()
		o.UpstreamRoots = nil // the CA's certificate
		o.DialContext = nil
	})
	r.policy.AddTyped(typedEmail)
	for _, h2 := range []bool{false, true} {
		c := r.client(h2)
		wantRefused(t, "POST", do(t, c, newReq(t, "POST", "https://"+siteHost+"/apply", strings.NewReader("x"))), netpolicy.ReasonBlocked)
		wantRefused(t, "typed", do(t, c, newReq(t, "GET", "http://"+siteHost+"/?e="+typedEmail, nil)), netpolicy.ReasonByGet)
		if up.Accepted() != 0 || upHits.Load() != 0 {
			t.Fatalf("refused requests reached the upstream: %d connections, %d requests", up.Accepted(), upHits.Load())
		}
	}
	for _, h2 := range []bool{false, true} {
		c := r.client(h2)
		for _, u := range []string{"https://" + siteHost + "/a?x=1", "http://" + siteHost + "/b"} {
			a := do(t, c, newReq(t, "GET", u, nil))
			if a.code != 200 || a.body != "upstream GET "+u {
				t.Errorf("via upstream %s: %d %q", u, a.code, a.body)
			}
		}
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Errorf("the site was reached directly %d times", n)
	}
	if upHits.Load() != 4 {
		upMu.Lock()
		t.Errorf("upstream saw %v, want 4 requests", upSeen)
		upMu.Unlock()
	}
}

// A WebSocket handshake is decided like any request and, allowed, passed through both in
// a tunnel (Hijack inside internal/mitm's HTTP/1.1 tunnels) and as a plain-HTTP proxy
// request; Close ends an open WebSocket.
func TestWebSocket(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)
	handshake := func(c *rawConn, target, host string) *http.Response {
		t.Helper()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nProxy-Foo: x\r\n\r\n", target, host)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("handshake %s: %v", target, err)
		}
		return resp
	}
	echo := func(c *rawConn, msg string) {
		t.Helper()
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c.br, got); err != nil || string(got) != msg {
			t.Fatalf("echo: %q %v, want %q", got, err, msg)
		}
	}

	// refused: the handshake URL carries a typed value
	tc := tunnel(t, r.gate.Addr(), siteHost)
	resp := handshake(tc, "/ws?u=jane.doe%40example.com", siteHost)
	b, _ := io.ReadAll(resp.Body)
	wantRefused(t, "WebSocket handshake", answer{code: resp.StatusCode, header: resp.Header, body: string(b)}, netpolicy.ReasonByGet)
	if refs := r.lastRefusals(); len(refs) != 1 || !refs[0].WebSocket || refs[0].Verdict.Carrier != netpolicy.CarrierURL || refs[0].Method != "GET" {
		t.Errorf("refusals %+v", refs)
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Fatalf("site saw %d requests", n)
	}

	// allowed, in a tunnel
	tc = tunnel(t, r.gate.Addr(), siteHost)
	resp = handshake(tc, "/ws?room=1", siteHost)
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("tunnel handshake: %d %v", resp.StatusCode, resp.Header)
	}
	echo(tc, "hello through the tunnel")
	echo(tc, strings.Repeat("x", 100<<10))

	// allowed, plain HTTP (ws://)
	pc := dialRaw(t, r.gate.Addr())
	resp = handshake(pc, "http://"+siteHost+"/ws", siteHost)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("plain handshake: %d", resp.StatusCode)
	}
	echo(pc, "hello in plain")

	seen := r.site.requests()
	if len(seen) != 2 || seen[0].proto != 1 {
		t.Fatalf("site saw %+v", seen)
	}
	for _, s := range seen {
		if _, ok := s.header["Proxy-Foo"]; ok || !isWebSocket(s.header) {
			t.Errorf("site got the handshake fields %v", s.header)
		}
	}
	if r.gate.Forwarded() != 2 || r.gate.Refused() != 1 {
		t.Errorf("forwarded %d refused %d", r.gate.Forwarded(), r.gate.Refused())
	}

	// Close returns (every handler, the joined WebSockets' included, has returned) and the
	// client sides are closed
	if err := r.gate.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*rawConn{tc, pc} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ne net.Error
		if n, err := c.br.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("WebSocket still open after Close: %d %v", n, err)
		}
	}
}

// A WebSocket whose site side ended first (the browser's side still open: the gate passed
// the end on as a half close and waits for the browser's) is closed by Close, in a tunnel
// and plain; Close does not wait for the browser.
func TestWebSocketSiteEndsFirst(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	open := func(c *rawConn, target string) {
		t.Helper()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", target, siteHost)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake %s: %v %v", target, resp, err)
		}
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c.br) // the echo, then the site's end passed on
		if err != nil || string(got) != "ping" {
			t.Fatalf("%s: read %q %v, want ping then the end", target, got, err)
		}
	}
	tc := tunnel(t, r.gate.Addr(), siteHost)
	open(tc, "/wsonce")
	pc := dialRaw(t, r.gate.Addr())
	open(pc, "http://"+siteHost+"/wsonce")

	closed := make(chan error, 1)
	go func() { closed <- r.gate.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testDeadline):
		t.Fatal("Close did not return while WebSockets the site had ended were open on the browser's side")
	}
	// Close returned: every handler did, and a handler returns only once its hijacked
	// connection is closed
}

// A URL past the shell's header bound is answered 431 before it is read whole (the
// request line is never finished here); one past netpolicy.MaxURLBytes but within the
// bound is refused unread by the policy (CarrierSize) while a value is typed.
func TestHugeURL(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)

	c := dialRaw(t, r.gate.Addr())
	wrote := make(chan error, 1)
	go func() {
		if _, err := io.WriteString(c, "GET http://"+siteHost+"/?q="); err != nil {
			wrote <- err
			return
		}
		chunk := []byte(strings.Repeat("a", 64<<10))
		for i := 0; i < 32; i++ { // 2 MiB, and never the end of the line
			if _, err := c.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("2 MiB URL: %d, want 431", resp.StatusCode)
	}
	c.Close()
	<-wrote

	for _, n := range []int{netpolicy.MaxURLBytes + 1, 900 << 10} {
		u := "https://" + siteHost + "/?q=" + strings.Repeat("b", n)
		wantRefused(t, fmt.Sprintf("URL of %d bytes", len(u)), do(t, r.client(false), newReq(t, "GET", u, nil)), netpolicy.ReasonByGet)
	}
	refs := r.lastRefusals()
	if len(refs) != 2 || refs[0].Verdict.Carrier != netpolicy.CarrierSize || refs[1].Verdict.Carrier != netpolicy.CarrierSize {
		t.Errorf("refusals %+v", refs)
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Errorf("site saw %d requests", n)
	}
}

// A refused request's body is never read: a POST announcing 1 GiB and sending none of it
// is answered at once.
func TestRefusedBodyNotRead(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	for _, tc := range []struct {
		c      *rawConn
		target string
	}{
		{dialRaw(t, r.gate.Addr()), "http://" + siteHost + "/apply"},
		{tunnel(t, r.gate.Addr(), siteHost), "/apply"},
	} {
		c, target := tc.c, tc.target
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\nsome", target, siteHost, 1<<30)
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		wantRefused(t, "POST of 1 GiB to "+target, answer{code: resp.StatusCode, header: resp.Header, body: string(b)}, netpolicy.ReasonBlocked)
	}
	if n := r.site.hits.Load(); n != 0 {
		t.Errorf("site saw %d requests", n)
	}
}

// Allowed requests stream: the site reads the start of a body the client has not
// finished, and the client reads the start of an answer the site has not finished.
func TestStreaming(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.Release()
	for _, h2 := range []bool{false, true} {
		c := r.client(h2)
		pr, pw := io.Pipe()
		type result struct {
			a   answer
			err error
		}
		res := make(chan result, 1)
		go func() {
			resp, err := c.Do(newReq(t, "POST", "https://"+siteHost+"/upload", pr))
			if err != nil {
				res <- result{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			res <- result{a: answer{code: resp.StatusCode, body: string(b)}, err: err}
		}()
		if _, err := io.WriteString(pw, "first"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.site.gotFirst:
		case <-time.After(20 * time.Second):
			t.Fatal("the site never saw the start of the body")
		}
		io.WriteString(pw, " and the rest")
		pw.Close()
		got := <-res
		if got.err != nil || got.a.code != 200 || got.a.body != "upload 18" {
			t.Errorf("upload (h2 %v): %+v", h2, got)
		}
	}

	resp, err := r.client(true).Get("https://" + siteHost + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	r.site.open()
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
		t.Errorf("rest %q %v", rest, err)
	}
}

// No answer from upstream is a 502 with a text body: an unknown host, a site whose
// certificate the roots do not verify, a site that does not answer in time.
func TestUpstreamFailure(t *testing.T) {
	r := newRig(t, netpolicy.ModeFillAndReview, func(o *Options) { o.ResponseHeaderTimeout = 200 * time.Millisecond })
	c := r.client(false)
	for _, u := range []string{"https://nowhere.gate.test/x", "http://nowhere.gate.test/x", "https://" + siteHost + "/hang"} {
		a := do(t, c, newReq(t, "GET", u, nil))
		if a.code != http.StatusBadGateway || !strings.HasPrefix(a.body, "pab guard: upstream error: ") || a.header.Get(RefusedHeader) != "" {
			t.Errorf("%s: %d %q", u, a.code, a.body)
		}
	}
	if log := r.log.String(); !strings.Contains(log, "GET nowhere.gate.test: upstream error") || strings.Contains(log, "/x") {
		t.Errorf("error log %q", log)
	}

	// the system roots do not know the test sites' CA
	r2 := newRig(t, netpolicy.ModeFillAndReview, func(o *Options) { o.UpstreamRoots = nil })
	a := do(t, r2.client(false), newReq(t, "GET", "https://"+siteHost+"/x", nil))
	if a.code != http.StatusBadGateway || !strings.Contains(a.body, "certificate") {
		t.Errorf("untrusted site: %d %q", a.code, a.body)
	}
}

// 500 refused requests at once, half of them plain POSTs announcing 1 GiB bodies they
// never send, half GETs carrying a typed value over one HTTP/2 tunnel: all answered 403,
// nothing reaches the site, the heap does not keep them, and after Close the goroutines
// are back to where they were.
func TestFloodOfRefusals(t *testing.T) {
	baseline := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc

	r := newRig(t, netpolicy.ModeFillAndReview)
	r.policy.AddTyped(typedEmail)
	const n = 250
	h2 := r.client(true)
	var wg sync.WaitGroup
	var bad atomic.Int64
	conns := make([]net.Conn, n)
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", r.gate.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(testDeadline))
		conns[i] = c
	}
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func(c net.Conn) {
			defer wg.Done()
			fmt.Fprintf(c, "POST http://%s/apply HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", siteHost, siteHost, 1<<30)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "POST"})
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				bad.Add(1)
			}
		}(conns[i])
		go func(i int) {
			defer wg.Done()
			resp, err := h2.Get(fmt.Sprintf("https://%s/s?i=%d&e=%s", siteHost, i, typedEmail))
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.ProtoMajor != 2 {
				bad.Add(1)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bad.Load() != 0 {
		t.Errorf("%d answers were not the gate's 403", bad.Load())
	}
	if r.gate.Refused() != 2*n || r.site.hits.Load() != 0 || len(r.lastRefusals()) != 2*n {
		t.Errorf("refused %d, site hits %d, refusals %d", r.gate.Refused(), r.site.hits.Load(), len(r.lastRefusals()))
	}
	for _, c := range conns {
		c.Close()
	}
	r.close()

	if !waitFor(20*time.Second, func() bool { return runtime.NumGoroutine() <= baseline+2 }) {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d after Close, %d before\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapAlloc) - int64(heapBefore); grew > 32<<20 {
		t.Errorf("heap grew by %d bytes", grew)
	}
}
