// Command kubeletlogs stands in for the one kubelet endpoint deploy/k8s-test.sh needs: the
// container logs the API server fetches for pods/log (`kubectl logs`), here served from
// the files runpod writes, so that `pab k8s collect` reads them through the real API
// server as it would on a cluster.
//
//	kubeletlogs --dir DIR --cert F --key F --client-ca F --port-file F
//
// It listens on 127.0.0.1 (a free port, written to --port-file once listening) with TLS
// (--cert, --key) and accepts only clients whose certificate --client-ca signed (the API
// server's --kubelet-client-certificate). GET /containerLogs/NS/POD/CONTAINER answers
// DIR/POD.logs/CONTAINER.log (runpod --logs DIR/POD.logs), 404 until runpod wrote it;
// limitBytes is honoured, and the query parameters it does not implement (follow,
// previous, timestamps, tailLines, sinceSeconds, sinceTime) are answered 400 rather than
// ignored. Names are checked (DNS-1123), so no path leaves DIR. It runs until SIGTERM.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
)

var name = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$`)

func main() {
	dir := flag.String("dir", "", "directory of runpod's log directories (POD.logs/CONTAINER.log)")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	clientCA := flag.String("client-ca", "", "CA of the client certificates to accept (PEM)")
	portFile := flag.String("port-file", "", "write the port here once listening")
	flag.Parse()
	if err := run(*dir, *cert, *key, *clientCA, *portFile); err != nil {
		fmt.Fprintln(os.Stderr, "kubeletlogs:", err)
		os.Exit(1)
	}
}

func run(dir, cert, key, clientCA, portFile string) error {
	if dir == "" || cert == "" || key == "" || clientCA == "" || portFile == "" {
		return errors.New("--dir, --cert, --key, --client-ca and --port-file are required")
	}
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return err
	}
	pem, err := os.ReadFile(clientCA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s: no certificate", clientCA)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler(dir),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if err := atomicfile.Write(portFile, []byte(port+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kubeletlogs: serving %s on 127.0.0.1:%s\n", dir, port)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-done:
		return err
	case <-sig:
		return srv.Close()
	}
}

func handler(dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/containerLogs/") || len(parts) != 3 {
			http.Error(w, "only GET /containerLogs/NS/POD/CONTAINER", http.StatusNotFound)
			return
		}
		for _, p := range parts {
			if !name.MatchString(p) || strings.Contains(p, "..") {
				http.Error(w, "bad name", http.StatusBadRequest)
				return
			}
		}
		q := r.URL.Query()
		for _, unsupported := range []string{"follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime"} {
			if v := q.Get(unsupported); v != "" && v != "false" {
				http.Error(w, unsupported+" is not supported by this stand-in", http.StatusBadRequest)
				return
			}
		}
		limit := int64(-1)
		if v := q.Get("limitBytes"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				http.Error(w, "bad limitBytes", http.StatusBadRequest)
				return
			}
			limit = n
		}
		f, err := os.Open(filepath.Join(dir, parts[1]+".logs", parts[2]+".log"))
		if err != nil {
			http.Error(w, "no log (yet) for "+parts[1]+"/"+parts[2], http.StatusNotFound)
			return
		}
		defer f.Close()
		var rd io.Reader = f
		if limit > 0 {
			rd = io.LimitReader(f, limit)
		}
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, rd)
	})
}
