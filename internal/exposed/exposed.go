// Package exposed says when a server of pab listens beyond the loopback interface: the
// one warning pab replay, pab record and pab browser print for a --listen that other
// machines can reach.
package exposed

import (
	"fmt"
	"net"
	"net/netip"
)

// Loopback reports whether addr (a listener's address, host:port or *net.TCPAddr) can be
// reached only from this machine: its IP is a loopback address (127.0.0.0/8, ::1). The
// unspecified address (0.0.0.0, ::, an empty host as in ":8899") binds every interface and
// is not loopback; neither is a host name.
func Loopback(addr net.Addr) bool {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(tcp.IP)
		return ok && ip.Unmap().IsLoopback()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Warning returns the line to print when addr is not loopback, "" when it is: prog ("pab
// replay") listens on addr, reachable from other machines, and exposes what (e.g. "the
// recording and the control API (http://rr.control/)"), with the advice to listen on
// 127.0.0.1 instead.
func Warning(prog string, addr net.Addr, what string) string {
	if Loopback(addr) {
		return ""
	}
	return fmt.Sprintf("%s: warning: listening on %s, which is not loopback: any machine that can reach this one can use %s; give --listen 127.0.0.1:PORT to keep it on this machine", prog, addr, what)
}
