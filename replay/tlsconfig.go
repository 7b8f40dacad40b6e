package replay

import (
	"crypto/tls"

	"github.com/elazarl/goproxy"
)

// MITMTLSConfig returns a goproxy ConnectAction.TLSConfig function for HTTPS interception
// with ca: the leaf certificate is chosen per handshake from the client's SNI (else the
// CONNECT host) and cached by ca; TLS 1.2 or later; ALPN offers only http/1.1, so every
// request goes through goproxy's request handlers (an h2 client would bypass them, see
// library-bugs.md G1). It is what `pab record` uses; the replay server's own config also
// answers h2-only clients.
func MITMTLSConfig(ca *CA) func(host string, ctx *goproxy.ProxyCtx) (*tls.Config, error) {
	return func(host string, _ *goproxy.ProxyCtx) (*tls.Config, error) {
		return &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				name := hello.ServerName
				if name == "" {
					name = host
				}
				cert, err := ca.LeafFor(name)
				if err != nil {
					return nil, err
				}
				return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"http/1.1"}}, nil
			},
		}, nil
	}
}
