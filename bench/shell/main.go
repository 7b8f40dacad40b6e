// Command shell is pab's MITM shell (internal/mitm) with the baseline's answers: the same
// shell `pab replay` runs (goproxy's CONNECT, TLS with pab's CA and a leaf per host, the
// refusal watch, the time and memory bounds of mitm.Limits at their defaults, HTTP/2 offered
// by ALPN), but the handler of bench/baseline (bench/internal/answers: a map from host and
// request URI to the recorded body) instead of replay's lookup and log. Against the
// baseline it measures what the shell costs; against pab replay, what replay's own work
// costs (bench/README.md "Two peers at once").
//
//	shell -listen 127.0.0.1:0 -ca-dir DIR -cycle cycle.tsv [-cycle page.tsv]
//
// -ca-dir is pab's CA directory (ca.pem and ca-key.pem, tlsca's layout; made there when
// missing). It prints "shell: N answers on http://ADDR" to stderr once it listens.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/pab-dev/pab/bench/internal/answers"
	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/tlsca"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	caDir := flag.String("ca-dir", "", "pab's CA directory (ca.pem, ca-key.pem)")
	var cycles answers.CycleFlag
	flag.Var(&cycles, "cycle", "cycle file (bench/gen's cycle.tsv format) whose exchanges are served; may be repeated")
	flag.Parse()
	if err := run(*listen, *caDir, cycles); err != nil {
		fmt.Fprintln(os.Stderr, "shell:", err)
		os.Exit(1)
	}
}

func run(listen, caDir string, cycles []string) error {
	if caDir == "" || len(cycles) == 0 {
		return errors.New("-ca-dir and -cycle are required")
	}
	m := answers.Map{}
	for _, c := range cycles {
		if _, err := answers.Load(c, m); err != nil {
			return err
		}
	}
	ca, err := tlsca.LoadOrCreate(caDir)
	if err != nil {
		return err
	}
	h := answers.Handler(m)
	s, err := mitm.New(mitm.Config{
		Handler:  h,
		Direct:   h,
		CA:       ca,
		HTTP2:    true,
		OnRefuse: func(mitm.Refusal) {}, // as replay: the refusal watch on every connection
	})
	if err != nil {
		return err
	}
	ln, err := mitm.Listen(listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "shell: %d answers on http://%s\n", len(m), ln.Addr())
	return s.Serve(ln)
}
