package replay

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// BenchmarkProxyHTTPS measures whole requests through a real proxy on loopback: HTTPS
// through CONNECT, keep-alive, 16 client goroutines, a 3 KiB body each, over HTTP/1.1
// (one tunnel per goroutine) and HTTP/2 (one tunnel, many streams). "replay" is
// replay.Server; "shell" is the same MITM shell with a handler that answers the same
// bytes from a map in memory, no lookup and no log: the speed limit of the shell, so that
// replay's ratio to it is what the lookup, the WARC read and the log cost. Client and
// proxy share the process, so cpu-ns/op counts both; compare ratios. Profile the proxy's
// side with
//
//	go test ./replay -run '^$' -bench ProxyHTTPS/replay/h1 -cpuprofile cpu.out
//	go tool pprof -top -focus 'http.\(\*conn\).serve|mitm' replay.test cpu.out
func BenchmarkProxyHTTPS(b *testing.B) {
	const n = 200
	exs := make([]ex, n)
	bodies := map[string][]byte{}
	for i := range exs {
		u := fmt.Sprintf("https://shop.test/p/%d.js", i)
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 3<<10)
		exs[i] = ex{method: "GET", url: u, status: 200,
			header: []string{"Content-Type: application/javascript", "Cache-Control: max-age=60", "Date: Mon, 30 Nov 2026 10:00:00 GMT"}, body: body}
		bodies["/p/"+fmt.Sprint(i)+".js"] = body
	}
	bd := writeTestBundle(b, b.TempDir(), recording.Manifest{}, exs)
	rs, err := rules.Default()
	if err != nil {
		b.Fatal(err)
	}
	ca := sharedCA(b)
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://shop.test/p/%d.js", i)
	}
	serve := map[string]func(b *testing.B) (addr string, stop func()){
		"replay": func(b *testing.B) (string, func()) {
			s, err := New(Options{Bundle: bd, Rules: rs, CA: ca, Log: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := s.Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go s.Serve(ln)
			return ln.Addr().String(), func() { s.Close() }
		},
		"shell": func(b *testing.B) (string, func()) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, ok := bodies[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				w.Header()["Content-Type"] = []string{"application/javascript"}
				w.Header()["Cache-Control"] = []string{"max-age=60"}
				w.Header()["Date"] = []string{"Mon, 30 Nov 2026 10:00:00 GMT"}
				w.Header()["Content-Length"] = []string{"3072"}
				w.Write(body)
			})
			s, err := mitm.New(mitm.Config{Handler: h, CA: ca, HTTP2: true})
			if err != nil {
				b.Fatal(err)
			}
			ln, err := mitm.Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go s.Serve(ln)
			return ln.Addr().String(), func() { s.Close() }
		},
	}
	for _, name := range []string{"replay", "shell"} {
		for _, proto := range []string{"h1", "h2"} {
			b.Run(name+"/"+proto, func(b *testing.B) {
				addr, stop := serve[name](b)
				defer stop()
				proxyURL := &url.URL{Scheme: "http", Host: addr}
				tr := &http.Transport{
					Proxy:               http.ProxyURL(proxyURL),
					TLSClientConfig:     &tls.Config{RootCAs: ca.CertPool(), CurvePreferences: []tls.CurveID{tls.X25519}},
					MaxIdleConnsPerHost: 64,
					ForceAttemptHTTP2:   proto == "h2",
					DialContext:         (&net.Dialer{}).DialContext,
				}
				if proto == "h1" {
					tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
					tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				get := func(i int) {
					resp, err := client.Get(urls[i%n])
					if err != nil {
						b.Error(err)
						return
					}
					m, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || m != 3<<10 || (proto == "h2") != (resp.ProtoMajor == 2) {
						b.Errorf("%s: %d, %d bytes, %s", urls[i%n], resp.StatusCode, m, resp.Proto)
					}
				}
				get(0) // the tunnel and leaf certificate, outside the timing
				b.ReportAllocs()
				b.SetParallelism(8) // 16 goroutines on 2 cores
				c0 := cpuTime()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						get(i)
						i += 7
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
