package record

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestShellRefusedIsLogged: a POST whose 9 MiB URL the proxy shell refuses with 431 before
// the recorder sees it is a "refused" line of the record log with its method, its URL cut,
// the status and the shell's note; nothing is forwarded or stored.
func TestShellRefusedIsLogged(t *testing.T) {
	g := newRig(t, Options{})
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go io.WriteString(c, "POST http://site.test/apply?x="+strings.Repeat("z", 9<<20)+" HTTP/1.1\r\nHost: site.test\r\n\r\n")
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 431 ") {
		t.Fatalf("answer %q %v, want 431", status, err)
	}
	g.stop()
	var refused []LogLine
	for _, l := range g.logLines() {
		if l.Event == "refused" {
			refused = append(refused, l)
		}
	}
	if len(refused) != 1 {
		t.Fatalf("refused lines %+v, want one", refused)
	}
	l := refused[0]
	if l.Method != "POST" || l.Status != 431 || !strings.HasPrefix(l.URL, "http://site.test/apply?x=zzz") || len(l.URL) > 8<<10 ||
		!strings.Contains(l.Note, "request header over") || !strings.Contains(l.Note, "URL cut") {
		l.URL = l.URL[:min(len(l.URL), 40)]
		t.Errorf("refused line %+v", l)
	}
	if st := g.rec.Stats(); st.Stored != 0 || st.UpstreamError != 0 {
		t.Errorf("stats %+v", st)
	}
}
