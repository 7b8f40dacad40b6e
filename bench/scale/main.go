// Command scale writes the inputs of pab's scale series (bench/scale.sh, bench/README.md
// "Scale series"): a gzip WARC of -n exchanges as a crawler writes it (WARC 1.1, one gzip
// member per record, a response record then its request record per exchange), a task
// repository to import it into, and the URLs the start and load measurements request.
//
//	scale -out DIR -n 100000 [-body small|large] [-cycle 500] [-seed 1]
//
// DIR receives:
//
//	crawl.warc.gz             the WARC (never committed: bench/scale.sh makes it each run)
//	repo/sites/scale.test.yaml site rules: a search endpoint (kind search, text_param q)
//	repo/tasks/scale/task.yaml the task the WARC is imported into
//	cycle.tsv                 -cycle exchanges whose URL has no query, in bench/load's
//	                          cycle format: url, status, content type, "-", sha256 hex, size
//	lookups.tsv               one request per lookup step: kind (exact, fuzzy, search,
//	                          latest), url
//
// The mix, by exchange number: 85% HTML pages on 64 hosts (https://sNN.scale.test/p/N.html),
// 6% the same pages with a tracking parameter (fuzzy candidates), 5% searches (/search?q=
// two or three words), 3% JSON answers, 1% a cart page recorded again and again (latest).
// "small" bodies are 300 to 800 bytes of HTML, "large" 8 to 40 KiB. Every body is distinct
// (so no revisit records), and the output is the same for the same flags.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// TaskID is the id of the generated task.
const TaskID = "scale"

const siteRules = `# bench/scale: the scale series' site (bench/README.md)
hosts: [SCALEHOSTS]
endpoints:
  - name: search
    match: "GET /search"
    kind: search
    text_param: q
latest: ["*/cart"]
`

var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber azure
beige black blue bronze brown coral cream cyan gold green grey indigo ivory jade khaki lemon lilac
linen maroon mint navy olive orange peach pearl pink plum purple red rose ruby sand silver tan teal`)

func main() {
	out := flag.String("out", "", "output directory (created)")
	n := flag.Int("n", 1000, "number of exchanges")
	body := flag.String("body", "small", "body sizes: small (300-800 B) or large (8-40 KiB)")
	cycle := flag.Int("cycle", 500, "exchanges in cycle.tsv")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *out == "" || *n < 10 || (*body != "small" && *body != "large") {
		fmt.Fprintln(os.Stderr, "usage: scale -out DIR -n N (at least 10) [-body small|large] [-cycle 500] [-seed 1]")
		os.Exit(2)
	}
	if err := generate(*out, *n, *body == "large", *cycle, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func generate(out string, n int, large bool, cycleN int, seed uint64) error {
	repo := filepath.Join(out, "repo")
	taskDir := filepath.Join(repo, "tasks", TaskID)
	for _, d := range []string{filepath.Join(repo, "sites"), taskDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	hosts := make([]string, 64)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("s%02d.scale.test", i)
	}
	rules := strings.Replace(siteRules, "SCALEHOSTS", strings.Join(hosts, ", "), 1)
	if err := os.WriteFile(filepath.Join(repo, "sites", "scale.test.yaml"), []byte(rules), 0o644); err != nil {
		return err
	}
	card := "id: " + TaskID + "\ntitle: Scale series recording (bench/scale)\nprompt: Not a task; a recording for pab's scale benchmarks.\n"
	if err := os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte(card), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "crawl.warc.gz"))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	r := rand.New(rand.NewPCG(seed, seed^0x5ca1e))
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

	cyc, err := os.Create(filepath.Join(out, "cycle.tsv"))
	if err != nil {
		return err
	}
	lk, err := os.Create(filepath.Join(out, "lookups.tsv"))
	if err != nil {
		return err
	}
	cycleEvery := max(1, n/max(1, cycleN))
	inCycle := 0
	lookups := map[string]int{}
	var rec strings.Builder
	for i := 0; i < n; i++ {
		host := fmt.Sprintf("s%02d.scale.test", i%64)
		kind := i % 100
		var u, ctype, lookupKind, lookupURL string
		switch {
		case kind < 85:
			u = fmt.Sprintf("https://%s/p/%d.html", host, i)
			ctype = "text/html"
			lookupKind, lookupURL = "exact", u
		case kind < 91:
			u = fmt.Sprintf("https://%s/item?id=%d&utm_source=x%d", host, i, r.IntN(9))
			ctype = "text/html"
			lookupKind, lookupURL = "fuzzy", fmt.Sprintf("https://%s/item?id=%d&utm_source=other", host, i)
		case kind < 96:
			q := words[r.IntN(len(words))] + "+" + words[r.IntN(len(words))] + "+" + words[r.IntN(len(words))]
			u = fmt.Sprintf("https://%s/search?q=%s", host, q)
			ctype = "text/html"
			lookupKind, lookupURL = "search", u[:strings.LastIndexByte(u, '+')]
		case kind < 99:
			u = fmt.Sprintf("https://%s/api/v1/item/%d.json", host, i)
			ctype = "application/json"
			lookupKind, lookupURL = "exact", u
		default:
			u = fmt.Sprintf("https://%s/cart", host)
			ctype = "text/html"
			lookupKind, lookupURL = "latest", u
		}
		b := makeBody(r, i, ctype, large)
		ts := t0.Add(time.Duration(i) * 10 * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		sum := sha256.Sum256(b)
		rid := recordID(r)
		head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s; charset=utf-8\r\nContent-Length: %d\r\nCache-Control: max-age=60\r\n\r\n", ctype, len(b))
		block := append([]byte(head), b...)
		rec.Reset()
		fmt.Fprintf(&rec, "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: %s\r\nWARC-Date: %s\r\nWARC-Target-URI: %s\r\n"+
			"Content-Type: application/http; msgtype=response\r\nWARC-Payload-Digest: sha256:%s\r\nContent-Length: %d\r\n\r\n",
			rid, ts, u, hex.EncodeToString(sum[:]), len(block))
		if err := member(zw, bw, rec.String(), block); err != nil {
			return err
		}
		path := u[strings.Index(u[8:], "/")+8:]
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: scale/1\r\nAccept: */*\r\n\r\n", path, host)
		rec.Reset()
		fmt.Fprintf(&rec, "WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: %s\r\nWARC-Date: %s\r\nWARC-Target-URI: %s\r\n"+
			"WARC-Concurrent-To: %s\r\nContent-Type: application/http; msgtype=request\r\nContent-Length: %d\r\n\r\n",
			recordID(r), ts, u, rid, len(req))
		if err := member(zw, bw, rec.String(), []byte(req)); err != nil {
			return err
		}
		if kind < 85 && i%cycleEvery == 0 && inCycle < cycleN {
			fmt.Fprintf(cyc, "%s\t200\t%s\t-\t%s\t%d\n", u, ctype, hex.EncodeToString(sum[:]), len(b))
			inCycle++
		}
		if lookups[lookupKind] < 200 && r.IntN(max(1, n/1000)) == 0 {
			fmt.Fprintf(lk, "%s\t%s\n", lookupKind, lookupURL)
			lookups[lookupKind]++
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	for _, c := range []*os.File{f, cyc, lk} {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}

// member writes one record (WARC header, block, CRLF CRLF) as its own gzip member.
func member(zw *gzip.Writer, w *bufio.Writer, head string, block []byte) error {
	zw.Reset(w)
	zw.Write([]byte(head))
	zw.Write(block)
	zw.Write([]byte("\r\n\r\n"))
	return zw.Close()
}

func recordID(r *rand.Rand) string {
	return fmt.Sprintf("<urn:uuid:%08x-%04x-%04x-%04x-%012x>", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
}

// makeBody is the payload of exchange i: distinct text of a random length.
func makeBody(r *rand.Rand, i int, ctype string, large bool) []byte {
	n := 300 + r.IntN(500)
	if large {
		n = 8<<10 + r.IntN(32<<10)
	}
	var b strings.Builder
	if ctype == "application/json" {
		fmt.Fprintf(&b, `{"id":%d,"words":"`, i)
	} else {
		fmt.Fprintf(&b, "<!doctype html><html><head><title>Page %d</title></head><body><p>", i)
	}
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	if ctype == "application/json" {
		b.WriteString(`"}`)
	} else {
		b.WriteString("</p></body></html>\n")
	}
	return []byte(b.String())
}
