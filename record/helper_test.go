package record

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/tlsca"
)

// rig is a running in-process recorder with its CA and work directory.
type rig struct {
	t     *testing.T
	rec   *Recorder
	ca    *tlsca.CA
	work  string
	addr  string
	serve chan error
}

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	ca, err := tlsca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	opts.CA = ca
	if opts.WorkDir == "" {
		opts.WorkDir = filepath.Join(t.TempDir(), "work")
	}
	rec, _, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, rec: rec, ca: ca, work: opts.WorkDir, addr: ln.Addr().String(), serve: make(chan error, 1)}
	go func() { g.serve <- rec.Serve(ln) }()
	t.Cleanup(func() { g.stop() })
	return g
}

// stop shuts the recorder down (once) and checks Serve returned nil.
func (g *rig) stop() {
	g.t.Helper()
	if g.serve == nil {
		return
	}
	if err := g.rec.Shutdown(); err != nil {
		g.t.Errorf("shutdown: %v", err)
	}
	if err := <-g.serve; err != nil {
		g.t.Errorf("serve: %v", err)
	}
	g.serve = nil
}

// client goes through the recorder, trusts pab's CA and never decompresses.
func (g *rig) client() *http.Client {
	pu, _ := url.Parse("http://" + g.addr)
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              http.ProxyURL(pu),
			TLSClientConfig:    &tls.Config{RootCAs: g.ca.CertPool()},
			DisableCompression: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// build stops the recorder and builds its bundle.
func (g *rig) build() (*recording.Bundle, *BuildReport, string) {
	g.t.Helper()
	g.stop()
	dir := filepath.Join(g.t.TempDir(), "bundle")
	rep, err := Build(JournalPath(g.work), dir, recording.Manifest{TaskID: "t"})
	if err != nil {
		g.t.Fatal(err)
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { b.Close() })
	return b, rep, dir
}

// logLines reads the record log.
func (g *rig) logLines() []LogLine {
	g.t.Helper()
	f, err := os.Open(LogPath(g.work))
	if err != nil {
		g.t.Fatal(err)
	}
	defer f.Close()
	var out []LogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20) // a line names its URL whole
	for sc.Scan() {
		var l LogLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			g.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		g.t.Fatalf("read %s: %v", LogPath(g.work), err)
	}
	return out
}

// logFor is the last log line for url with an exchange event.
func (g *rig) logFor(u string) LogLine {
	g.t.Helper()
	var found LogLine
	for _, l := range g.logLines() {
		if l.URL == u {
			found = l
		}
	}
	if found.Event == "" {
		g.t.Fatalf("no log line for %s in %+v", u, g.logLines())
	}
	return found
}

// rawServer serves each connection with handle on a loopback listener.
func rawServer(t *testing.T, handle func(c net.Conn, req *http.Request)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					handle(c, req)
					if strings.EqualFold(req.Header.Get("Connection"), "close") {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func entryByURL(b *recording.Bundle, u string) *recording.Entry {
	for i := range b.Entries {
		if b.Entries[i].URL == u {
			return &b.Entries[i]
		}
	}
	return nil
}

// refusingAddr is a loopback address where connections are refused: a socket bound to it
// that never listens, held until the test ends, so that no listener the test starts later
// (the recorder's own) can take its port, as one could a port that was closed.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
