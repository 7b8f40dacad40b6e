package replay

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// refusedPost sends a POST whose URL is 9 MiB long to the proxy at addr, as a plain-HTTP
// proxy request, and returns the answer's status line. The URL is over the shell's header
// bound (mitm.DefaultMaxHeaderBytes), so the shell answers before any handler sees it.
func refusedPost(t testing.TB, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(c, "POST http://site.test/search?q="+strings.Repeat("x", 9<<20)+" HTTP/1.1\r\nHost: site.test\r\nContent-Length: 0\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestProxyRefusedIsLogged: a POST whose 9 MiB URL the proxy shell refuses with 431 is one
// line of the replay log, like any other (time, method, the URL cut and marked truncated,
// status, note, source "refused"), is counted at rr.control/stats, and pab stats shows it
// as refused.
func TestProxyRefusedIsLogged(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	if got := tp.get(t, "https://site.test/", nil); got.status != 200 {
		t.Fatalf("home: %d", got.status)
	}
	if st := refusedPost(t, tp.addr); !strings.HasPrefix(st, "HTTP/1.1 431 ") {
		t.Fatalf("9 MiB URL answered %q, want 431", st)
	}
	if c := tp.s.counts.snapshot(); c.BySource[SourceRefused] != 1 || c.Total != 2 {
		t.Errorf("counts %+v, want 1 refused of 2", c)
	}
	lines := tp.logLines(t)
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2: %+v", len(lines), lines)
	}
	l := lines[1]
	if l.Method != "POST" || l.Status != 431 || l.Source != SourceRefused || !l.Truncated || l.URLSize <= len(l.URL) ||
		!strings.HasPrefix(l.URL, "http://site.test/search?q=xxx") || len(l.URL) > MaxLogURL || l.Time == "" ||
		!strings.Contains(l.Note, "request header over") {
		l.URL = l.URL[:min(len(l.URL), 40)]
		t.Errorf("refused line %+v", l)
	}
	sum := NewSummarizer(nil)
	for i := range lines {
		sum.Add(&lines[i])
	}
	var out strings.Builder
	sum.Stats().Print(&out, 5)
	if !strings.Contains(out.String(), "\n  refused         1   50.0%\n") {
		t.Errorf("pab stats:\n%s", out.String())
	}
}
