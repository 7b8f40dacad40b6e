package mitm

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// maxEmptyContinuations is how many CONTINUATION frames without a byte of header block
// one HTTP/2 header block may have before the connection is closed: a client never needs
// one (RFC 9113 section 6.10 lets it send them; sending many is an attack).
const maxEmptyContinuations = 16

// setupH2 makes golang.org/x/net/http2's Server the HTTP/2 half of hs, with the shell's
// Limits (MaxStreams, WriteTimeout as WriteByteTimeout), serving each connection through
// an h2Watch that bounds its header blocks. unencrypted is for the listening socket's h2c
// (prior knowledge) connections, whose preface net/http has read; otherwise it serves
// the tunnels that chose h2 by ALPN.
func (s *Server) setupH2(hs *http.Server, unencrypted bool) error {
	l := s.cfg.Limits
	h2s := &http2.Server{
		MaxConcurrentStreams: uint32(l.MaxStreams),
		CountError: func(errType string) {
			s.logf.Printf("HTTP/2: %s", errType)
		},
	}
	if l.WriteTimeout > 0 {
		h2s.WriteByteTimeout = l.WriteTimeout
	}
	if err := http2.ConfigureServer(hs, h2s); err != nil {
		return err
	}
	serve := func(hs *http.Server, w *h2Watch, c net.Conn, h http.Handler, sawPreface bool) {
		ctx := context.Background()
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		defer w.stop()
		if cs := connStateOf(ctx); cs != nil {
			defer close(cs.done)
		}
		h2s.ServeConn(c, &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs, SawClientPreface: sawPreface})
	}
	if unencrypted {
		hs.TLSNextProto["unencrypted_http2"] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
			u, ok := c.NetConn().(interface{ UnencryptedNetConn() net.Conn })
			if !ok {
				c.NetConn().Close()
				return
			}
			w := &h2Watch{Conn: u.UnencryptedNetConn(), s: s} // the preface was read
			serve(hs, w, w, h, true)
		}
	} else {
		hs.TLSNextProto["h2"] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
			w := &tlsWatch{h2Watch: h2Watch{Conn: c, s: s, prefaceLeft: len(http2.ClientPreface)}, tc: c}
			serve(hs, &w.h2Watch, w, h, false)
		}
	}
	return nil
}

// tlsWatch is an h2Watch over a TLS connection: it keeps ConnectionState, from which
// x/net/http2 sets Request.TLS.
type tlsWatch struct {
	h2Watch
	tc *tls.Conn
}

func (w *tlsWatch) ConnectionState() tls.ConnectionState { return w.tc.ConnectionState() }

// h2Watch is an HTTP/2 server connection whose frames are followed as they are read,
// to bound the header blocks: a HEADERS frame without END_HEADERS must be followed by its
// last CONTINUATION within Config.ReadHeaderTimeout, and with at most
// maxEmptyContinuations empty ones; else the connection is closed (RFC 9113 section
// 4.3: a header block is one unit, nothing else may come in between).
type h2Watch struct {
	net.Conn
	s *Server

	// followed by the reading goroutine only
	prefaceLeft int
	hdr         [9]byte
	hdrN        int
	skip        int // payload bytes of the current frame left
	inBlock     bool
	empty       int

	mu    sync.Mutex
	timer *time.Timer
}

func (w *h2Watch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.follow(p[:n])
	return n, err
}

// follow reads the frame headers in b, the next bytes of the connection.
func (w *h2Watch) follow(b []byte) {
	if w.prefaceLeft > 0 {
		k := min(w.prefaceLeft, len(b))
		w.prefaceLeft -= k
		b = b[k:]
	}
	for len(b) > 0 {
		if w.skip > 0 {
			k := min(w.skip, len(b))
			w.skip -= k
			b = b[k:]
			continue
		}
		k := copy(w.hdr[w.hdrN:], b)
		w.hdrN += k
		b = b[k:]
		if w.hdrN < len(w.hdr) {
			return
		}
		w.hdrN = 0
		length := int(binary.BigEndian.Uint32(w.hdr[0:4]) >> 8)
		typ, flags := http2.FrameType(w.hdr[3]), http2.Flags(w.hdr[4])
		w.skip = length
		switch typ {
		case http2.FrameHeaders:
			if flags.Has(http2.FlagHeadersEndHeaders) {
				if w.inBlock { // a protocol error x/net/http2 ends the connection for
					w.inBlock = false
					w.stop()
				}
				break
			}
			w.inBlock, w.empty = true, 0
			w.startTimer()
		case http2.FrameContinuation:
			if flags.Has(http2.FlagContinuationEndHeaders) {
				w.inBlock = false
				w.stop()
				break
			}
			if length == 0 && w.inBlock {
				w.empty++
				if w.empty > maxEmptyContinuations {
					w.s.logf.Printf("%s: HTTP/2 header block with more than %d empty CONTINUATION frames: connection closed", w.Conn.RemoteAddr(), maxEmptyContinuations)
					w.Conn.Close()
				}
			}
		}
	}
}

func (w *h2Watch) startTimer() {
	d := w.s.cfg.ReadHeaderTimeout
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(d, func() {
		w.s.logf.Printf("%s: HTTP/2 header block not complete within %v: connection closed", w.Conn.RemoteAddr(), d)
		w.Conn.Close()
	})
}

// stop stops the header block's timer.
func (w *h2Watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
