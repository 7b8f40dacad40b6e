// Command report turns the raw results of bench/run.sh into docs/performance.md.
// The peers are pab, the baseline (bench/baseline, a minimal Go MITM proxy: the speed
// limit of the machine), mitmproxy and whistle.
//
//	report -dir SCRATCH -out docs/performance.md
//
// It reads, from SCRATCH: results.jsonl (one JSON object a line: "kind" load, start, rss
// dialcheck or pageload; see bench/load and bench/pageload), gobench.txt (the output of go test -bench), machine.txt
// ("name: value" lines) and config.txt (the same, the run's settings); -notes appends a
// hand-written Markdown file. Numbers of repeated
// runs are shown as ranges (min–max); ratios compare pab's mean to the peer's mean.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type rec struct {
	Kind       string  `json:"kind"`
	Label      string  `json:"label"`
	Rep        int     `json:"rep"`
	Scheme     string  `json:"scheme"`
	Conns      int     `json:"conns"`
	Requests   int64   `json:"requests"`
	RPS        float64 `json:"rps"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	P999       float64 `json:"p999_ms"`
	Errors     int64   `json:"errors"`
	Mismatches int64   `json:"mismatches"`
	Verified   int64   `json:"verified"`
	CPUPerReq  float64 `json:"cpu_ms_per_req"`
	Cores      float64 `json:"cores"`
	PeakRSSMB  float64 `json:"peak_rss_mb"`
	NewConns   int64   `json:"new_conns"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"rate"`
	RSSMB      float64 `json:"rss_mb"`
	Outbound   int     `json:"outbound"`
	Connects   int     `json:"connects"`
	Detail     string  `json:"detail"`
	FirstError string  `json:"first_error"`
	// load: the protocol asked for inside the tunnel (h1, h2; empty in older results:
	// h1), streams per worker, the one host kept, the protocol the answers came over.
	// pageload: Proto is what the proxy was set to offer.
	Proto     string `json:"proto"`
	Streams   int    `json:"streams"`
	Host      string `json:"host"`
	ProtoSeen string `json:"proto_seen"`
	// pageload
	Loads      int       `json:"loads"`
	Failed     int       `json:"failed"`
	Median     float64   `json:"median_ms"`
	P90        float64   `json:"p90_ms"`
	Samples    []float64 `json:"samples_ms"`
	Protocols  string    `json:"protocols"`
	Responses  int       `json:"responses"`
	CPUPerLoad float64   `json:"cpu_ms_per_load"`
}

var peers = []string{"pab", "baseline", "mitmproxy", "whistle"}

func main() {
	dir := flag.String("dir", "", "the scratch directory of bench/run.sh")
	out := flag.String("out", "", "the Markdown file to write")
	notes := flag.String("notes", "", "a Markdown file appended as is (bench/notes.md: how the peers are set up)")
	flag.Parse()
	if *dir == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "report: -dir and -out are required")
		os.Exit(2)
	}
	if err := run(*dir, *out, *notes); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func readKV(path string) map[string]string {
	m := map[string]string{}
	data, err := os.ReadFile(path)
	if err != nil {
		return m
	}
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

func run(dir, out, notes string) error {
	recs, err := readResults(filepath.Join(dir, "results.jsonl"))
	if err != nil {
		return err
	}
	gb, _ := os.ReadFile(filepath.Join(dir, "gobench.txt"))
	rp := &report{recs: recs, cfg: readKV(filepath.Join(dir, "config.txt")), gb: string(gb)}
	rp.w = func(format string, a ...any) { fmt.Fprintf(&rp.b, format, a...) }
	rp.header(readKV(filepath.Join(dir, "machine.txt")))
	rp.throughput()
	rp.pacedRuns()
	if len(rp.h2runs) > 0 {
		writeH2(rp.w, rp.h2runs, rp.cfg)
	}
	rp.handlerTimes()
	if pls := filter(recs, "pageload"); len(pls) > 0 {
		writePageLoads(rp.w, pls, rp.cfg)
	}
	rp.startTimes()
	rp.memory()
	rp.benchmarks()
	rp.dials()
	rp.goals()
	if prof, err := os.ReadFile(filepath.Join(dir, "pprof.md")); err == nil && len(prof) > 0 {
		rp.w("\n## Where pab's CPU per request goes\n\n")
		rp.w("A CPU profile of `pab replay` (`PAB_CPUPROFILE`) through one more HTTPS run with 16 connections, no warmup, summarized by `bench/pprofsum.py`: each sample goes to the first category that a frame of its stack matches (TLS, the replay's own steps, GC), the rest to the innermost frame of pab's code or of net/http. The baseline pays the TLS, net/http and runtime rows too; pab's own rows are the lookup, the log line, the payload read and the rest of the handler.\n\n")
		rp.b.Write(prof)
	}
	if notes != "" {
		data, err := os.ReadFile(notes)
		if err != nil {
			return err
		}
		rp.w("\n")
		rp.b.Write(data)
	}
	return os.WriteFile(out, []byte(rp.b.String()), 0o644)
}

// readResults reads results.jsonl: one rec a line, blank lines skipped.
func readResults(path string) ([]rec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []rec
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r rec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("results.jsonl: %q: %w", line, err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// report is docs/performance.md being written: the results, the run's settings, and the
// runs sorted by kind as the sections need them.
type report struct {
	b    strings.Builder
	w    func(format string, a ...any)
	recs []rec
	cfg  map[string]string
	gb   string // gobench.txt

	loads, paced, h2runs []rec  // kind load: saturated, paced (rate > 0), h2 or one host
	cells                []cell // the saturated cells, https first, by connections
	pcells               []pcell
}

// pcell is one paced cell: scheme, connections, rate.
type pcell struct {
	scheme string
	conns  int
	rate   float64
}

// header writes the title, the machine and the run.
func (rp *report) header(m map[string]string) {
	w, cfg := rp.w, rp.cfg
	w("# Performance: pab replay against whistle, mitmproxy and a minimal Go MITM baseline\n\n")
	w("Written by `bench/run.sh` (see bench/README.md); do not edit by hand, run it again.\n\n")
	w("- **Date:** %s\n", m["date"])
	w("- **Machine:** %s, %s cores, %s RAM, kernel %s\n", m["cpu"], m["cores"], m["ram"], m["kernel"])
	w("- **Software:** %s; pab %s; the baseline `bench/baseline` (Go standard library, built with the same Go); mitmproxy %s (Debian); whistle %s (npm, pinned in bench/peers/package-lock.json); Node.js %s; Chromium %s (Debian)\n",
		m["go"], m["pab"], m["mitmproxy"], m["whistle"], m["node"], m["chromium"])
	w("- **Load on the machine:** %s at the start, %s at the end (`uptime`: load average over 1, 5, 15 minutes). The machine is shared with other jobs, so every number below is noisy: runs are interleaved and repeated, and shown as ranges.\n", m["load_before"], m["load_after"])
	w("- **Run:** %s\n\n", cfg["mode"])
}

// pick returns a peer's runs of a cell that answered at all.
func (rp *report) pick(peer string, c cell) []rec {
	var out []rec
	for _, x := range rp.loads {
		if x.Label == peer && x.Scheme == c.scheme && x.Conns == c.conns && x.Requests > 0 {
			out = append(out, x)
		}
	}
	return out
}

// stalled counts the runs of a cell that got no answer in the whole timed window (shown,
// never averaged in).
func (rp *report) stalled(peer string, c cell) string {
	n := 0
	for _, x := range rp.loads {
		if x.Label == peer && x.Scheme == c.scheme && x.Conns == c.conns && x.Requests == 0 {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (+%d run stalled: no answer in %s)", n, rp.cfg["duration"])
}

// pickPaced returns a peer's runs of a paced cell.
func (rp *report) pickPaced(peer string, c pcell) []rec {
	var out []rec
	for _, x := range rp.paced {
		if x.Label == peer && x.Scheme == c.scheme && x.Conns == c.conns && x.Rate == c.rate {
			out = append(out, x)
		}
	}
	return out
}

// throughput writes the saturated runs: one row a cell, then one a run.
func (rp *report) throughput() {
	w, recs, cfg := rp.w, rp.recs, rp.cfg
	for _, r := range filter(recs, "load") {
		if r.Host != "" || r.Proto == "h2" {
			rp.h2runs = append(rp.h2runs, r)
		} else if r.Rate > 0 {
			rp.paced = append(rp.paced, r)
		} else {
			rp.loads = append(rp.loads, r)
		}
	}
	w("## Throughput and latency through the proxy\n\n")
	w("%s. Each peer serves the same %s exchanges byte for byte (the URL cycle, a realistic mix of HTML, scripts, style sheets, images; mean body %s bytes); pab serves them from the whole %s recording. Each of N workers keeps one request in flight over its own keep-alive connections; %s timed after %s warmup per run, %s runs per cell, interleaved (pab, baseline, mitmproxy, whistle, then the next cell). Latency is the client's: from sending the request to the last byte of the body (there is no upstream, so all of it is added by the proxy). CPU is the whole process tree's (user+system), per request. Every answer's status and length are checked and every 10th body's SHA-256; a wrong answer would show in the *bad* column.\n\n",
		cfg["client"], cfg["cycle_n"], cfg["cycle_mean"], cfg["recording"], cfg["duration"], cfg["warmup"], cfg["reps"])
	w("The *baseline* is `bench/baseline`: a minimal MITM proxy written for this comparison with Go's standard library (CONNECT, `tls.Server` with one ECDSA P-256 leaf signed by pab's CA for every host, `net/http` serving HTTP/1.1 keep-alive inside the tunnel, answers from an in-memory map of the same bodies; no rules, no lookup index, no log, no recording on disk). It is the speed limit of this machine for a Go MITM proxy, not a usable replay: *pab ÷ baseline* below 1× in rps, and above 1× in CPU per request, is what pab's own work costs.\n\n")
	w("| scheme | conns | pab rps | baseline rps | mitmproxy rps | whistle rps | pab ÷ baseline (rps) | pab ÷ baseline (CPU/request) | pab ÷ mitmproxy | pab ÷ whistle | pab p50 / p99 / p99.9 ms | baseline p50 / p99 / p99.9 ms | mitmproxy p50 / p99 / p99.9 ms | whistle p50 / p99 / p99.9 ms |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rp.loads {
		c := cell{r.Scheme, r.Conns}
		if !slices.Contains(rp.cells, c) {
			rp.cells = append(rp.cells, c)
		}
	}
	slices.SortFunc(rp.cells, func(a, b cell) int {
		if a.scheme != b.scheme {
			return -strings.Compare(a.scheme, b.scheme)
		}
		return a.conns - b.conns
	})
	for _, c := range rp.cells {
		p, bl, mi, wh := rp.pick("pab", c), rp.pick("baseline", c), rp.pick("mitmproxy", c), rp.pick("whistle", c)
		w("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.scheme, c.conns,
			rng(p, rpsOf, 0)+rp.stalled("pab", c), rng(bl, rpsOf, 0)+rp.stalled("baseline", c),
			rng(mi, rpsOf, 0)+rp.stalled("mitmproxy", c), rng(wh, rpsOf, 0)+rp.stalled("whistle", c),
			ratioOf(p, bl, rpsOf, 2), ratioOf(p, bl, cpuOf, 2), ratio(p, mi), ratio(p, wh), lat(p), lat(bl), lat(mi), lat(wh))
	}
	w("\nPer run, CPU and connections:\n\n")
	w("| peer | scheme | conns | rep | rps | p50 ms | p99 ms | p99.9 ms | CPU ms/request | cores used | peak RSS MB (tree) | new TCP connections per request | errors | bad | verified bodies |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range rp.cells {
		for _, peer := range peers {
			for _, r := range rp.loads {
				if r.Label != peer || r.Scheme != c.scheme || r.Conns != c.conns {
					continue
				}
				ncr := 0.0
				if r.Requests > 0 {
					ncr = float64(r.NewConns) / float64(r.Requests)
				}
				w("| %s | %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.3f | %.2f | %.0f | %.2f | %d | %d | %d |\n", peer, r.Scheme, r.Conns, r.Rep, r.RPS, r.P50, r.P99, r.P999,
					r.CPUPerReq, r.Cores, r.PeakRSSMB, ncr, r.Errors, r.Mismatches, r.Verified)
			}
		}
	}
}

// pacedRuns writes the runs at a fixed request rate.
func (rp *report) pacedRuns() {
	w := rp.w
	w("\n### Added latency at a fixed request rate\n\n")
	w("The runs above send each next request as soon as the last is answered, so at 16 or 64 connections they measure a saturated proxy (and a client sharing its 2 cores): latency there is mostly queueing. Here the same 16 connections send at a fixed total rate, paced evenly; latency counts from each request's scheduled time, so a proxy that falls behind is charged for the wait. A rate a peer cannot sustain shows as large latencies.\n\n")
	w("| scheme | conns | rate (requests/s) | peer | achieved rps | p50 ms | p99 ms | p99.9 ms | CPU ms/request |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rp.paced {
		c := pcell{r.Scheme, r.Conns, r.Rate}
		if !slices.Contains(rp.pcells, c) {
			rp.pcells = append(rp.pcells, c)
		}
	}
	for _, c := range rp.pcells {
		for _, peer := range peers {
			rs := rp.pickPaced(peer, c)
			if len(rs) == 0 {
				continue
			}
			w("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s |\n", c.scheme, c.conns, c.rate, peer, rng(rs, rpsOf, 0),
				rng(rs, func(r rec) float64 { return r.P50 }, 2), rng(rs, func(r rec) float64 { return r.P99 }, 2),
				rng(rs, func(r rec) float64 { return r.P999 }, 2), rng(rs, func(r rec) float64 { return r.CPUPerReq }, 3))
		}
	}
}

// handlerTimes writes the time inside pab's handler, from its log.
func (rp *report) handlerTimes() {
	w, recs := rp.w, rp.recs
	if hs := filter(recs, "handler"); len(hs) > 0 {
		w("\n### Time inside pab's handler\n\n")
		w("From pab's own log (`ms` of every line, warmup included): from the request reaching the handler to its answer being ready, i.e. reading the request, the lookup and opening the recorded response; TLS, parsing and sending are not in it. Unlike the client's latencies above, it is not inflated by the client waiting for a core.\n\n")
		w("| load | requests logged | p50 ms | p99 ms | p99.9 ms |\n|---|---|---|---|---|\n")
		hl, by := byLabel(hs)
		for _, l := range hl {
			rs := by[l]
			w("| %s | %s | %s | %s | %s |\n", l, rng(rs, func(r rec) float64 { return float64(r.Requests) }, 0),
				rng(rs, func(r rec) float64 { return r.P50 }, 3), rng(rs, func(r rec) float64 { return r.P99 }, 3), rng(rs, func(r rec) float64 { return r.P999 }, 3))
		}
	}
}

// startTimes writes the start times.
func (rp *report) startTimes() {
	w, recs := rp.w, rp.recs
	starts := filter(recs, "start")
	w("\n## Start time\n\n")
	w("From launching the command to the first correct answer (an HTTPS request through the proxy whose body matches the recording), measured by `bench/load -mode start`. *Cold*: an empty cache (`PAB_CACHE`); *warm*: the cache kept from an earlier start. The task's published recording is format 3 (docs/bundle-format.md, \"Published layout\"): read in place (`data.warc.gz` parts, one gzip member per record), so cold and warm do the same work, the entries read and the index built, and the cache holds no copy of the WARC (a format 2 recording, `warc.tar.gz` parts, was unpacked into the cache on a cold start). `bench/startup.sh` compares this against an older pab in the same run. The peers load only the URL cycle (mitmproxy its flow file, whistle its rules, the baseline its bodies into memory and signs its one leaf), so their times are a floor, not a like-for-like comparison.\n\n")
	w("| what | seconds |\n|---|---|\n")
	labels, by := byLabel(starts)
	for _, l := range labels {
		rs := by[l]
		w("| %s | %s |\n", l, rng(rs, func(r rec) float64 { return r.Seconds }, 3))
	}
}

// memory writes the peak RSS figures.
func (rp *report) memory() {
	w, recs, cfg := rp.w, rp.recs, rp.cfg
	rss := filter(recs, "rss")
	w("\n## Memory\n\n")
	w("Peak resident set size of the whole process tree, sampled every 100 ms while serving the load (https, 16 connections) after a warm start, and right after start (idle).\n\n")
	w("| what | MB |\n|---|---|\n")
	labels, by := byLabel(rss)
	for _, l := range labels {
		rs := by[l]
		w("| %s | %s |\n", l, rng(rs, func(r rec) float64 { return r.RSSMB }, 0))
	}
	for _, peer := range peers {
		var rs []rec
		for _, r := range rp.loads {
			if r.Label == peer {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			w("| %s, during the throughput runs above (%s) | %s |\n", peer, cfg["recording"], rng(rs, func(r rec) float64 { return r.PeakRSSMB }, 0))
		}
	}
}

// benchmarks writes the go test -bench table.
func (rp *report) benchmarks() {
	w := rp.w
	w("\n## Lookup and key benchmarks (`go test -bench`)\n\n")
	w("`go test ./replay ./rules -run '^$' -bench 'Lookup100k|KeyOfRequest|NewIndex100k|Handler|KeyNormalize' -benchmem` over in-memory indexes of 100,000 entries (replay/lookup_bench_test.go, rules/key_bench_test.go). *cpu-ns/op* is the process's CPU time per operation (getrusage), which the other jobs on the machine disturb less than wall time (*ns/op*).\n\n")
	w("| benchmark | ns/op | cpu-ns/op | B/op | allocs/op |\n|---|---|---|---|---|\n")
	for _, g := range parseGoBench(rp.gb) {
		w("| %s | %s | %s | %s | %s |\n", g.name, g.rng("ns/op", 0), g.rng("cpu-ns/op", 0), g.rng("B/op", 0), g.rng("allocs/op", 0))
	}
}

// dials writes the outbound-connection check.
func (rp *report) dials() {
	w, recs := rp.w, rp.recs
	dials := filter(recs, "dialcheck")
	w("\n## No peer dials out\n\n")
	w("Each peer was run once under `strace -f -e trace=connect` while serving https and http requests; every `connect` to an address other than loopback, or to port 53 anywhere, counts as outbound.\n\n")
	w("| peer | connect calls | outbound | note |\n|---|---|---|---|\n")
	for _, r := range dials {
		w("| %s | %d | %d | %s |\n", r.Label, r.Connects, r.Outbound, r.Detail)
	}
}

// goals writes the table of the goals, each met or missed.
func (rp *report) goals() {
	w, recs := rp.w, rp.recs
	w("\n## Goals (issue 9)\n\n")
	w("| goal | measured | verdict |\n|---|---|---|\n")
	c16 := cell{"https", 16}
	goalRatio := func(peer string) {
		p, q := rp.pick("pab", c16), rp.pick(peer, c16)
		if len(p) == 0 || len(q) == 0 {
			w("| HTTPS keep-alive, 16 conns: ≥ 5× %s | not measured | — |\n", peer)
			return
		}
		x := mean(p, rpsOf) / mean(q, rpsOf)
		w("| HTTPS keep-alive, 16 conns: ≥ 5× %s | %.1f× | %s |\n", peer, x, verdict(x >= 5, fmt.Sprintf("short by %.0f%%", 100*(1-x/5))))
	}
	goalRatio("whistle")
	goalRatio("mitmproxy")
	for _, c := range rp.pcells {
		if c.scheme != "https" || c.conns != 16 {
			continue
		}
		if p := rp.pickPaced("pab", c); len(p) > 0 {
			x := maxOf(p, func(r rec) float64 { return r.P99 })
			w("| p99 added latency < 2 ms at 16 conns (https, paced at %.0f requests/s) | %s ms | %s |\n", c.rate, rng(p, func(r rec) float64 { return r.P99 }, 2),
				verdict(x < 2, fmt.Sprintf("%.1f× the goal (worst run)", x/2)))
		}
	}
	var hlabels []string
	for _, r := range filter(recs, "handler") {
		if strings.Contains(r.Label, "https, 16 connections") && !slices.Contains(hlabels, r.Label) {
			hlabels = append(hlabels, r.Label)
		}
	}
	for _, l := range hlabels {
		var rs []rec
		for _, r := range filter(recs, "handler") {
			if r.Label == l {
				rs = append(rs, r)
			}
		}
		x := maxOf(rs, func(r rec) float64 { return r.P99 })
		w("| p99 time inside pab's handler < 2 ms (%s) | %s ms | %s |\n", l, rng(rs, func(r rec) float64 { return r.P99 }, 3),
			verdict(x < 2, fmt.Sprintf("%.1f× the goal (worst run)", x/2)))
	}
	if p := rp.pick("pab", c16); len(p) > 0 {
		x := maxOf(p, func(r rec) float64 { return r.P99 })
		w("| p99 latency < 2 ms at 16 conns (https, saturated: as fast as answered) | %s ms | %s |\n", rng(p, func(r rec) float64 { return r.P99 }, 2),
			verdict(x < 2, fmt.Sprintf("%.1f× the goal (worst run); queueing on a saturated 2-core machine shared with the client", x/2)))
	}
	for _, l := range []string{"pab 75MB warm", "pab 75MB cold"} {
		var rs []rec
		for _, r := range filter(recs, "start") {
			if r.Label == l {
				rs = append(rs, r)
			}
		}
		lim := 0.3
		if strings.HasSuffix(l, "cold") {
			lim = 1
		}
		if len(rs) > 0 {
			x := maxOf(rs, func(r rec) float64 { return r.Seconds })
			w("| start, 75 MB recording, %s < %.1f s | %s s | %s |\n", strings.TrimPrefix(l, "pab 75MB "), lim, rng(rs, func(r rec) float64 { return r.Seconds }, 3),
				verdict(x < lim, fmt.Sprintf("%.1f× the goal (worst run)", x/lim)))
		}
	}
	var big []rec
	for _, r := range filter(recs, "rss") {
		if strings.Contains(r.Label, "500MB") && strings.Contains(r.Label, "serving") {
			big = append(big, r)
		}
	}
	if len(big) > 0 {
		x := maxOf(big, func(r rec) float64 { return r.RSSMB })
		w("| RSS < 150 MB serving the 500 MB recording | %s MB | %s |\n", rng(big, func(r rec) float64 { return r.RSSMB }, 0), verdict(x < 150, fmt.Sprintf("%.0f MB over", x-150)))
	} else {
		w("| RSS < 150 MB serving the 500 MB recording | not measured in this run (quick mode) | — |\n")
	}
	gbs := parseGoBench(rp.gb)
	for _, g := range []struct{ name, what string }{
		{"BenchmarkLookup100k/exact", "exact lookup < 2 µs"},
		{"BenchmarkLookup100k/fuzzy", "fuzzy lookup < 50 µs"},
		{"BenchmarkLookup100k/search", "search lookup < 50 µs"},
	} {
		lim := 2000.0
		if !strings.HasSuffix(g.name, "exact") {
			lim = 50000
		}
		for _, x := range gbs {
			if x.name == g.name {
				v := x.minOf("cpu-ns/op")
				if v == 0 {
					v = x.minOf("ns/op")
				}
				ok := verdict(v < lim, fmt.Sprintf("%.1f× the goal (CPU time)", v/lim))
				if wall := x.minOf("ns/op"); v < lim && wall >= lim {
					ok += fmt.Sprintf(" on CPU time; wall time %.1f× the goal on the loaded machine", wall/lim)
				}
				w("| %s at 100,000 entries | %s ns (cpu), %s ns (wall) | %s |\n", g.what, x.rng("cpu-ns/op", 0), x.rng("ns/op", 0), ok)
			}
		}
	}
	writeShellGoals(w, rp.pick, rp.h2runs)
}

// writeH2 writes the HTTP/2 against HTTP/1.1 section: pab and the baseline, one host's
// URLs, 16 HTTP/1.1 connections against one h2 connection with 16 streams.
func writeH2(w func(string, ...any), runs []rec, cfg map[string]string) {
	w("\n### HTTP/2 against HTTP/1.1 inside the tunnel\n\n")
	w("HTTPS through CONNECT, only the %s URLs of the cycle on `%s`, so that a worker has exactly one tunnel. *h1*: 16 workers, each with one HTTP/1.1 keep-alive connection and one request in flight (the same client as above). *h2*: one worker whose one connection offers h2 by ALPN and carries 16 requests at once (`bench/load -proto h2 -c 1 -streams 16`; Go's HTTP/2 transport, never a second connection while the server allows 16 streams). pab runs with its defaults (`--http2` on%s); the baseline with `-h2` for the h2 runs. *negotiated* is the protocol the timed answers came over. Same duration, warmup and checks as above; runs interleaved (pab, baseline; h1, then h2).\n\n",
		cfg["h2_urls"], cfg["h2_host"], map[string]string{"yes": "", "no": "; this pab has no --http2 flag"}[cfg["pab_http2"]])
	type key struct {
		peer, proto string
	}
	by := map[key][]rec{}
	for _, r := range runs {
		if r.Requests == 0 {
			continue
		}
		p := r.Proto
		if p == "" {
			p = "h1"
		}
		by[key{r.Label, p}] = append(by[key{r.Label, p}], r)
	}
	seen := func(rs []rec) string {
		var out []string
		for _, r := range rs {
			if r.ProtoSeen != "" && !slices.Contains(out, r.ProtoSeen) {
				out = append(out, r.ProtoSeen)
			}
		}
		return strings.Join(out, "; ")
	}
	cell := func(peer, proto string, f func(rec) float64, prec int) string {
		return rng(by[key{peer, proto}], f, prec)
	}
	w("| | h1, 16 connections | h2, 1 connection × 16 streams | h2 ÷ h1 |\n|---|---|---|---|\n")
	for _, peer := range []string{"pab", "baseline"} {
		w("| %s rps | %s | %s | %s |\n", peer, cell(peer, "h1", rpsOf, 0), cell(peer, "h2", rpsOf, 0), ratioOf(by[key{peer, "h2"}], by[key{peer, "h1"}], rpsOf, 2))
	}
	w("| pab ÷ baseline (rps) | %s | %s | |\n", ratioOf(by[key{"pab", "h1"}], by[key{"baseline", "h1"}], rpsOf, 2), ratioOf(by[key{"pab", "h2"}], by[key{"baseline", "h2"}], rpsOf, 2))
	for _, peer := range []string{"pab", "baseline"} {
		w("| %s CPU ms/request | %s | %s | %s |\n", peer, cell(peer, "h1", cpuOf, 3), cell(peer, "h2", cpuOf, 3), ratioOf(by[key{peer, "h2"}], by[key{peer, "h1"}], cpuOf, 2))
	}
	w("| pab ÷ baseline (CPU/request) | %s | %s | |\n", ratioOf(by[key{"pab", "h1"}], by[key{"baseline", "h1"}], cpuOf, 2), ratioOf(by[key{"pab", "h2"}], by[key{"baseline", "h2"}], cpuOf, 2))
	for _, peer := range []string{"pab", "baseline"} {
		w("| %s p50 / p99 / p99.9 ms | %s | %s | |\n", peer, lat(by[key{peer, "h1"}]), lat(by[key{peer, "h2"}]))
	}
	for _, peer := range []string{"pab", "baseline"} {
		w("| %s negotiated | %s | %s | |\n", peer, seen(by[key{peer, "h1"}]), seen(by[key{peer, "h2"}]))
	}
	w("\nPer run:\n\n| peer | proto | workers × streams | rep | negotiated | rps | p50 ms | p99 ms | CPU ms/request | cores used | peak RSS MB | new TCP connections | errors | bad |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, proto := range []string{"h1", "h2"} {
		for _, peer := range peers {
			for _, r := range runs {
				p := r.Proto
				if p == "" {
					p = "h1"
				}
				if r.Label != peer || p != proto {
					continue
				}
				w("| %s | %s | %d × %d | %d | %s | %.0f | %.2f | %.2f | %.3f | %.2f | %.0f | %d | %d | %d |\n", peer, p, r.Conns, max(r.Streams, 1), r.Rep, r.ProtoSeen,
					r.RPS, r.P50, r.P99, r.CPUPerReq, r.Cores, r.PeakRSSMB, r.NewConns, r.Errors, r.Mismatches)
			}
		}
	}
}

// writePageLoads writes the Chromium page-load section: median and p90 load time per
// peer and protocol, over the samples of every run.
func writePageLoads(w func(string, ...any), pls []rec, cfg map[string]string) {
	w("\n## Chromium page load\n\n")
	w("Debian's Chromium, headless, through the proxy (`bench/pageload`, with chromedp): the page %s. Each load is in a new tab of a new browser context (so it opens its tunnels again) with the cache disabled (`Network.setCacheDisabled`); %s timed loads after 2 untimed ones per run, %s runs. Load time is the page's Navigation Timing `loadEventStart`: from navigation start to the load event. *Protocol* is `Response.protocol` of CDP's `Network.responseReceived` for every response of the timed loads. pab is run with `--http2=true` and `--http2=false`%s, the baseline with and without `-h2`. With HTTP/1.1 Chromium opens up to 6 tunnels to the host; with h2, one. *Proxy CPU* is the proxy's process tree's CPU time per load.\n\n",
		cfg["page"], cfg["pageloads"], cfg["reps"], map[string]string{"yes": "", "no": " (this pab has no --http2 flag: both runs used its default)"}[cfg["pab_http2"]])
	w("| peer | proxy offers | protocol (responses) | loads (failed) | median ms | p90 ms | min–max ms | proxy CPU ms per load |\n|---|---|---|---|---|---|---|---|\n")
	type key struct{ peer, proto string }
	var keys []key
	for _, r := range pls {
		k := key{r.Label, r.Proto}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	medians := map[key]float64{}
	for _, k := range keys {
		var samples []float64
		var protos []string
		loads, failed := 0, 0
		var rs []rec
		for _, r := range pls {
			if r.Label == k.peer && r.Proto == k.proto {
				rs = append(rs, r)
				samples = append(samples, r.Samples...)
				loads += r.Loads
				failed += r.Failed
				if r.Protocols != "" {
					protos = append(protos, r.Protocols)
				}
			}
		}
		slices.Sort(samples)
		if len(samples) == 0 {
			w("| %s | %s | %s | %d (%d) | — | — | — | — |\n", k.peer, k.proto, strings.Join(protos, "; "), loads, failed)
			continue
		}
		medians[k] = quantile(samples, 0.5)
		w("| %s | %s | %s | %d (%d) | %.1f | %.1f | %.1f–%.1f | %s |\n", k.peer, k.proto, strings.Join(protos, "; "), loads, failed,
			quantile(samples, 0.5), quantile(samples, 0.9), samples[0], samples[len(samples)-1], rng(rs, func(r rec) float64 { return r.CPUPerLoad }, 1))
	}
	for _, peer := range []string{"pab", "baseline"} {
		if a, b := medians[key{peer, "h1"}], medians[key{peer, "h2"}]; a > 0 && b > 0 {
			w("\n%s: median load over h2 is %.2f× that over HTTP/1.1.", peer, b/a)
		}
	}
	for _, proto := range []string{"h1", "h2"} {
		if a, b := medians[key{"pab", proto}], medians[key{"baseline", proto}]; a > 0 && b > 0 {
			w("\npab ÷ baseline, median load over %s: %.2f×.", proto, a/b)
		}
	}
	w("\n")
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

type cell struct {
	scheme string
	conns  int
}

// writeShellGoals writes the goals of issue 14 (the MITM shell): pab's CPU per request and
// throughput against the baseline at HTTPS 16 and 64 connections, its ratios to mitmproxy
// and whistle, and h2 with 16 streams on one connection against HTTP/1.1 on 16.
func writeShellGoals(w func(string, ...any), pick func(string, cell) []rec, h2runs []rec) {
	w("\n## Goals (issue 14: the MITM shell)\n\n")
	w("| goal | measured | verdict |\n|---|---|---|\n")
	for _, conns := range []int{16, 64} {
		c := cell{"https", conns}
		p, b := pick("pab", c), pick("baseline", c)
		if len(p) == 0 || len(b) == 0 {
			w("| HTTPS keep-alive, %d conns: CPU per request ≤ 1.15× the baseline; rps ≥ 0.95× | not measured in this run | — |\n", conns)
			continue
		}
		cpu := mean(p, cpuOf) / mean(b, cpuOf)
		rps := mean(p, rpsOf) / mean(b, rpsOf)
		w("| HTTPS keep-alive, %d conns: CPU per request ≤ 1.15× the baseline | %.2f× (mean of runs) | %s |\n", conns, cpu, verdict(cpu <= 1.15, fmt.Sprintf("%.0f%% over", 100*(cpu/1.15-1))))
		w("| HTTPS keep-alive, %d conns: throughput ≥ 0.95× the baseline | %.2f× | %s |\n", conns, rps, verdict(rps >= 0.95, fmt.Sprintf("short by %.0f%%", 100*(1-rps/0.95))))
	}
	c16 := cell{"https", 16}
	for _, g := range []struct {
		peer string
		min  float64
	}{{"mitmproxy", 20}, {"whistle", 60}} {
		p, q := pick("pab", c16), pick(g.peer, c16)
		if len(p) == 0 || len(q) == 0 {
			w("| HTTPS 16 conns: ≥ %.0f× %s | not measured | — |\n", g.min, g.peer)
			continue
		}
		x := mean(p, rpsOf) / mean(q, rpsOf)
		w("| HTTPS 16 conns: ≥ %.0f× %s | %.1f× | %s |\n", g.min, g.peer, x, verdict(x >= g.min, fmt.Sprintf("short by %.0f%%", 100*(1-x/g.min))))
	}
	var h1, h2 []rec
	for _, r := range h2runs {
		if r.Label != "pab" || r.Requests == 0 {
			continue
		}
		if r.Proto == "h2" {
			h2 = append(h2, r)
		} else {
			h1 = append(h1, r)
		}
	}
	if len(h1) == 0 || len(h2) == 0 {
		w("| pab over h2, 16 streams on 1 connection ≥ pab over HTTP/1.1, 16 connections | not measured | — |\n")
		return
	}
	x := mean(h2, rpsOf) / mean(h1, rpsOf)
	w("| pab over h2, 16 streams on 1 connection ≥ pab over HTTP/1.1, 16 connections (rps) | %.2f× | %s |\n", x, verdict(x >= 1, fmt.Sprintf("short by %.0f%%", 100*(1-x))))
}
