package exposed

import (
	"net"
	"strings"
	"testing"
)

// TestLoopback: real listeners on 127.0.0.1 and ::1 are loopback; one on every interface
// (":0", the README's --listen :8899 case) is not, and its warning names what it exposes.
func TestLoopback(t *testing.T) {
	for _, c := range []struct {
		addr string
		loop bool
	}{{"127.0.0.1:0", true}, {"[::1]:0", true}, {":0", false}, {"0.0.0.0:0", false}} {
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			if c.addr == "[::1]:0" {
				continue // no IPv6 on this machine
			}
			t.Fatal(err)
		}
		got := Loopback(ln.Addr())
		w := Warning("pab replay", ln.Addr(), "the recording and the control API")
		ln.Close()
		if got != c.loop {
			t.Errorf("Loopback(%s listening on %s) = %v; want %v", c.addr, ln.Addr(), got, c.loop)
		}
		if c.loop != (w == "") {
			t.Errorf("Warning for %s = %q", c.addr, w)
		}
		if !c.loop && (!strings.Contains(w, "not loopback") || !strings.Contains(w, "the recording and the control API")) {
			t.Errorf("Warning for %s = %q; want it to say what is exposed", c.addr, w)
		}
	}
	for _, s := range []string{"localhost:80", "10.0.0.1:80", "bad"} {
		if Loopback(fakeAddr(s)) {
			t.Errorf("Loopback(%q) = true", s)
		}
	}
	if !Loopback(fakeAddr("127.0.0.2:80")) {
		t.Error("127.0.0.2 is loopback")
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }
