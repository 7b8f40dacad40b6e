// Command baseline is the minimal MITM proxy of pab's benchmarks (bench/README.md): the
// speed limit of this machine for what pab's replay does, with none of its work. Standard
// library only (and bench/internal/answers, which is too).
//
//	baseline -listen 127.0.0.1:18083 -ca-dir DIR -cycle cycle.tsv [-cycle page.tsv] [-h2]
//
// It is an HTTP proxy. A CONNECT is answered 200 and the tunnel is wrapped in tls.Server
// with ONE ECDSA P-256 leaf certificate, made at start and signed by the CA in -ca-dir
// (ca.pem and ca-key.pem, the key in PKCS#8: pab's own CA), whose names cover every host
// of the cycle files and *.bench.test; the CA certificate is sent along with the leaf, as
// pab does. The TLS connections are handed through a channel listener to a net/http Server
// that serves HTTP/1.1 with keep-alive (and h2 too, offered by ALPN, with -h2). A plain
// HTTP proxy request (absolute URI) is answered by the same handler.
//
// Answers come from a map of host+path?query to Content-Type and body, read into memory at
// start from the body files of the cycle files (bench/gen's cycle.tsv format: url, status,
// content type, body file relative to the file's directory, sha256, size), for both
// schemes, by bench/internal/answers, whose handler bench/shell serves too. Anything else
// is 404. There are no rules, no log, no upstream: the proxy never dials.
package main

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/bench/internal/answers"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18083", "address to listen on")
	caDir := flag.String("ca-dir", "", "directory holding ca.pem and ca-key.pem (PKCS#8)")
	h2 := flag.Bool("h2", false, "offer h2 (and http/1.1) by ALPN inside the tunnel; without it, http/1.1 only")
	var cycles answers.CycleFlag
	flag.Var(&cycles, "cycle", "cycle file (bench/gen's cycle.tsv format) whose exchanges are served; may be repeated")
	flag.Parse()
	if err := run(*listen, *caDir, cycles, *h2); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run(listen, caDir string, cycles []string, h2 bool) error {
	if caDir == "" || len(cycles) == 0 {
		return errors.New("-ca-dir and -cycle are required")
	}
	m := answers.Map{}
	hosts := []string{"bench.test", "*.bench.test", "localhost"}
	for _, c := range cycles {
		hs, err := answers.Load(c, m)
		if err != nil {
			return err
		}
		for _, h := range hs {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	cert, err := leaf(caDir, hosts)
	if err != nil {
		return err
	}
	protos := []string{"http/1.1"}
	if h2 {
		protos = []string{"h2", "http/1.1"}
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: protos}

	handler := answers.Handler(m)
	quiet := log.New(io.Discard, "", 0)
	tunnels := newChanListener()
	inner := &http.Server{Handler: handler, ErrorLog: quiet, IdleTimeout: 120 * time.Second}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(h2)
	inner.Protocols = &protocols
	go inner.Serve(tunnels)

	outer := &http.Server{ErrorLog: quiet, IdleTimeout: 120 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodConnect {
				if !r.URL.IsAbs() {
					http.Error(w, "baseline is a proxy: send an absolute URI or CONNECT", http.StatusBadRequest)
					return
				}
				handler.ServeHTTP(w, r)
				return
			}
			hj, ok := w.(http.Hijacker)
			if !ok {
				http.Error(w, "cannot hijack", http.StatusInternalServerError)
				return
			}
			conn, brw, err := hj.Hijack()
			if err != nil {
				return
			}
			if _, err := conn.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
				conn.Close()
				return
			}
			var c net.Conn = conn
			if brw.Reader.Buffered() > 0 { // the client sent its ClientHello without waiting
				c = &prefixConn{Conn: conn, r: brw.Reader}
			}
			if !tunnels.push(tls.Server(c, tlsConf)) {
				conn.Close()
			}
		})}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "baseline: %d answers, protocols %s, on http://%s\n", len(m), strings.Join(protos, ","), ln.Addr())
	return outer.Serve(ln)
}

// leaf makes the one ECDSA P-256 leaf certificate for names, signed by the CA in dir.
func leaf(dir string, names []string) (tls.Certificate, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return tls.Certificate{}, err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return tls.Certificate{}, fmt.Errorf("%s: no PEM in ca.pem or ca-key.pem", dir)
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ca-key.pem: %w", err)
	}
	caKey, ok := k.(crypto.Signer)
	if !ok {
		return tls.Certificate{}, errors.New("ca-key.pem: not a signing key")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "bench baseline"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, caCert.Raw}, PrivateKey: key}, nil
}

// chanListener is a net.Listener whose connections are pushed to it: the TLS tunnels.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// prefixConn reads what the hijacked connection's reader had buffered before the rest.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }
