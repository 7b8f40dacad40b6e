// Command gen writes a large synthetic recording for pab's benchmarks (bench/README.md):
// a task repository holding one task whose recording is a real bundle written with
// recording.BundleWriter and published with recording.Pack, plus the files the peers (whistle,
// mitmproxy) and the load generator need to serve and check the same exchanges.
//
//	gen -out DIR -n 20000 -size 75MB [-cycle 500] [-page 60] [-seed 1]
//
// DIR receives:
//
//	repo/sites/bench.test.yaml          site rules: a search endpoint (kind search, text_param q)
//	repo/tasks/bench/task.yaml          the task
//	repo/tasks/bench/recording/         the published recording (format 2)
//	cycle/cycle.tsv                     the URL cycle of the load test, one exchange a line:
//	                                    url, status, content type, body file, sha256 hex, size
//	cycle/files/HOST/PATH               the body of each cycle exchange (whistle serves these)
//	lookups.tsv                         requests for the lookup mix: kind (exact, fuzzy,
//	                                    search), url
//	page/page.tsv, page/files/HOST/PATH the page-load page (bench/pageload): one HTML page,
//	                                    https://www.bench.test/pl/index.html, first line,
//	                                    then its -page subresources, same format as cycle.tsv
//
// The page-load page references -page subresources on its own host (a third scripts, a
// fifth style sheets, the rest real PNG images), all recorded after the -n exchanges of the
// mix and drawn from their own random stream, so the mix and the URL cycle are the same
// with or without it.
//
// The mix is realistic in kind and size: HTML pages (with tracking and fuzzy query
// parameters), scripts and style sheets, images (incompressible bytes), JSON API answers
// with volatile parameters, and searches. Sizes are scaled so that archive/data.warc is
// about -size bytes. Output is deterministic for the same flags.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/recording"
)

// TaskID is the id of the generated task.
const TaskID = "bench"

func main() {
	out := flag.String("out", "", "output directory (created; must not hold an older run)")
	n := flag.Int("n", 20000, "number of exchanges")
	size := flag.String("size", "75MB", "approximate size of archive/data.warc (e.g. 75MB, 500MB)")
	cycle := flag.Int("cycle", 500, "number of exchanges in the load test's URL cycle")
	page := flag.Int("page", 60, "number of subresources of the page-load page (0: no page)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *out == "" {
		fail(errors.New("gen: -out DIR is required"))
	}
	target, err := parseSize(*size)
	if err != nil {
		fail(err)
	}
	if *n < 100 || *n > 5_000_000 {
		fail(fmt.Errorf("gen: -n %d: want 100 to 5000000 exchanges", *n))
	}
	if *page < 0 || *page > 1000 {
		fail(fmt.Errorf("gen: -page %d: want 0 to 1000 subresources", *page))
	}
	if err := generate(*out, *n, target, *cycle, *page, *seed); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// parseSize reads "75MB", "500MB", "1GB" or a number of bytes (decimal units).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(strings.TrimSpace(s))
	switch {
	case strings.HasSuffix(u, "GB"):
		mult, u = 1_000_000_000, strings.TrimSuffix(u, "GB")
	case strings.HasSuffix(u, "MB"):
		mult, u = 1_000_000, strings.TrimSuffix(u, "MB")
	case strings.HasSuffix(u, "KB"):
		mult, u = 1_000, strings.TrimSuffix(u, "KB")
	}
	v, err := strconv.ParseInt(u, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("gen: size %q: want a positive number with KB, MB or GB", s)
	}
	return v * mult, nil
}

// kind is one sort of exchange of the mix.
type kind struct {
	name  string
	share float64 // of the exchanges
	mul   float64 // body size relative to the mean
	ctype string
	rtype string // RR-Resource-Type
}

var kinds = []kind{
	{"html", 0.22, 1.6, "text/html; charset=utf-8", "document"},
	{"script", 0.20, 1.3, "application/javascript", "script"},
	{"style", 0.08, 0.6, "text/css", "stylesheet"},
	{"image", 0.28, 1.0, "image/png", "image"},
	{"json", 0.17, 0.15, "application/json", "xhr"},
	{"search", 0.05, 1.2, "text/html; charset=utf-8", "document"},
}

// headerOverhead is about what the WARC and HTTP headers of one exchange (response and
// request records) add to data.warc.
const headerOverhead = 1250

var words = func() []string {
	r := rand.New(rand.NewPCG(7, 7))
	out := make([]string, 2000)
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for i := range out {
		n := 3 + r.IntN(7)
		b := make([]byte, n)
		for j := range b {
			b[j] = letters[r.IntN(len(letters))]
		}
		out[i] = string(b)
	}
	return out
}()

type gen struct {
	r    *rand.Rand
	text []byte // 4 MiB of word text to cut bodies from
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	var b strings.Builder
	for b.Len() < 4<<20 {
		b.WriteString(words[g.r.IntN(len(words))])
		if g.r.IntN(12) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	g.text = []byte(b.String())
	return g
}

// textBody is a text body of about n bytes that starts with a unique line.
func (g *gen) textBody(prefix, suffix string, n int) []byte {
	out := make([]byte, 0, n+len(prefix)+len(suffix))
	out = append(out, prefix...)
	for len(out) < n {
		off := g.r.IntN(len(g.text) - 4096)
		take := min(n-len(out), 4096)
		out = append(out, g.text[off:off+take]...)
	}
	return append(out, suffix...)
}

// binBody is n incompressible bytes (an image).
func (g *gen) binBody(n int) []byte {
	out := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := g.r.Uint64()
		for j := 0; j < 8; j++ {
			out[i+j] = byte(v >> (8 * j))
		}
	}
	copy(out, "\x89PNG\r\n\x1a\n")
	return out
}

func (g *gen) size(mean float64, mul float64) int {
	return max(64, int(mean*mul*(0.3+1.4*g.r.Float64())))
}

func (g *gen) pick() kind {
	x := g.r.Float64()
	for _, k := range kinds {
		if x < k.share {
			return k
		}
		x -= k.share
	}
	return kinds[0]
}

// exchange builds exchange i: its URL, body and kind. cyclable reports a URL whose path
// alone names it (no query), which the whistle file rules of the peers can map.
func (g *gen) exchange(i int, mean float64) (k kind, rawURL string, body []byte, cyclable bool) {
	k = g.pick()
	n := g.size(mean, k.mul)
	switch k.name {
	case "html":
		if g.r.IntN(3) == 0 {
			rawURL = fmt.Sprintf("https://www.bench.test/p/%d.html?ref=nav_%d&utm_source=bench&color=%s", i, g.r.IntN(50), words[g.r.IntN(40)])
		} else {
			rawURL = fmt.Sprintf("https://www.bench.test/p/%d.html", i)
			cyclable = true
		}
		body = g.textBody(fmt.Sprintf("<!doctype html><html><head><title>Product %d</title></head><body><p>", i), "</p></body></html>\n", n)
	case "script":
		rawURL = fmt.Sprintf("https://static.bench.test/js/%d/app.js", i)
		body = g.textBody(fmt.Sprintf("/* bundle %d */\nvar words = \"", i), "\";\n", n)
		cyclable = true
	case "style":
		rawURL = fmt.Sprintf("https://static.bench.test/css/%d/site.css", i)
		body = g.textBody(fmt.Sprintf("/* sheet %d */\n.c%d { content: \"", i, i), "\"; }\n", n)
		cyclable = true
	case "image":
		rawURL = fmt.Sprintf("https://img.bench.test/i/%d.png", i)
		body = g.binBody(n)
		cyclable = true
	case "json":
		rawURL = fmt.Sprintf("https://api.bench.test/api/items.json?id=%d&page=%d&session=%016x&_=%d", i, g.r.IntN(9), g.r.Uint64(), 1700000000000+i)
		body = g.textBody(fmt.Sprintf(`{"id":%d,"page":%d,"text":"`, i, i%9), "\"}\n", n)
	case "search":
		q := url.QueryEscape(words[g.r.IntN(500)] + " " + words[g.r.IntN(500)] + " " + words[g.r.IntN(500)])
		rawURL = fmt.Sprintf("https://www.bench.test/s?q=%s&page=%d&sid=%d", q, g.r.IntN(3), i)
		body = g.textBody(fmt.Sprintf("<!doctype html><html><head><title>Search %d</title></head><body><p>", i), "</p></body></html>\n", n)
	}
	return k, rawURL, body, cyclable
}

func generate(out string, n int, target int64, cycleN, pageN int, seed uint64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	repo := filepath.Join(out, "repo")
	taskDir := filepath.Join(repo, "tasks", TaskID)
	for _, d := range []string{filepath.Join(repo, "sites"), taskDir, filepath.Join(out, "cycle", "files")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "sites", "bench.test.yaml"), []byte(siteRules), 0o644); err != nil {
		return err
	}
	card := "id: " + TaskID + "\ntitle: Synthetic benchmark recording (bench/gen)\nprompt: Not a task; a recording for pab's benchmarks.\n"
	if err := os.WriteFile(filepath.Join(taskDir, "task.yaml"), []byte(card), 0o644); err != nil {
		return err
	}
	bundleDir := filepath.Join(out, "bundle")
	w, err := recording.NewBundleWriter(bundleDir, recording.Manifest{TaskID: TaskID, Locale: "en-US", Timezone: "UTC"})
	if err != nil {
		return err
	}
	g := newGen(seed)
	mean := float64(target)/float64(n) - headerOverhead
	var wsum float64
	for _, k := range kinds {
		wsum += k.share * k.mul
	}
	mean = max(200, mean/wsum)
	every := max(1, n*7/10/max(1, cycleN)) // about 70% of exchanges can be in the cycle
	cycle, err := os.Create(filepath.Join(out, "cycle", "cycle.tsv"))
	if err != nil {
		w.Abort()
		return err
	}
	defer cycle.Close()
	lookups, err := os.Create(filepath.Join(out, "lookups.tsv"))
	if err != nil {
		w.Abort()
		return err
	}
	defer lookups.Close()
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var prev []byte
	inCycle := 0
	for i := 1; i <= n; i++ {
		k, rawURL, body, cyclable := g.exchange(i, mean)
		if i%50 == 0 && prev != nil && k.name == "image" {
			body = prev // a repeated payload: stored once, as a revisit
			cyclable = false
		}
		if k.name == "image" {
			prev = body
		}
		x := recording.Exchange{
			Method: "GET", URL: rawURL, Date: start.Add(time.Duration(i) * 50 * time.Millisecond),
			ReqHeader: http.Header{"User-Agent": {"pab-bench/1"}, "Accept": {"*/*"}},
			Status:    200, Proto: "HTTP/1.1",
			RespHeader: http.Header{"Content-Type": {k.ctype}, "Cache-Control": {"max-age=3600"},
				"Date": {start.Format(http.TimeFormat)}},
			Body: body, ResourceType: k.rtype,
		}
		if _, err := w.Add(x); err != nil {
			w.Abort()
			return err
		}
		if k.name == "html" && cyclable {
			if err := w.AddPage(recording.Page{URL: rawURL, TS: recording.FormatTime(x.Date), Fetched: "GET"}); err != nil {
				w.Abort()
				return err
			}
		}
		if cyclable && i%every == 0 && inCycle < cycleN {
			inCycle++
			if err := writeCycle(filepath.Join(out, "cycle"), cycle, rawURL, k.ctype, body); err != nil {
				w.Abort()
				return err
			}
		}
		if i%97 == 0 {
			writeLookups(lookups, k.name, rawURL)
		}
	}
	if pageN > 0 {
		if err := writePage(out, w, pageN, seed, start.Add(time.Duration(n+1)*50*time.Millisecond)); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := recording.Pack(bundleDir, filepath.Join(taskDir, "recording")); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(bundleDir, recording.WARCFile))
	if err != nil {
		return err
	}
	if err := os.RemoveAll(bundleDir); err != nil {
		return err
	}
	fmt.Printf("gen: %d exchanges (and a page of %d subresources), data.warc %d bytes, %d in the URL cycle, task %s\n", n, pageN, fi.Size(), inCycle, taskDir)
	return nil
}

// writeCycle adds one exchange to a cycle file in dir (cycle/ or page/): its body file
// under dir/files and its line.
func writeCycle(dir string, cycle *os.File, rawURL, ctype string, body []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	rel := filepath.Join("files", u.Host, filepath.FromSlash(strings.TrimPrefix(u.Path, "/")))
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	_, err = fmt.Fprintf(cycle, "%s\t200\t%s\t%s\t%s\t%d\n", rawURL, ctype, rel, hex.EncodeToString(sum[:]), len(body))
	return err
}

// writeLookups writes requests for the lookup mix: the recorded URL (exact), and for
// URLs with volatile parameters a variant that only a fuzzy or search lookup answers.
func writeLookups(f *os.File, kind, rawURL string) {
	fmt.Fprintf(f, "exact\t%s\n", rawURL)
	switch kind {
	case "json":
		u, _ := url.Parse(rawURL)
		q := u.Query()
		q.Set("session", "ffffffffffffffff")
		q.Set("_", "1")
		u.RawQuery = q.Encode()
		fmt.Fprintf(f, "fuzzy\t%s\n", u)
	case "search":
		u, _ := url.Parse(rawURL)
		q := u.Query()
		ws := strings.Fields(q.Get("q"))
		for i, j := 0, len(ws)-1; i < j; i, j = i+1, j-1 {
			ws[i], ws[j] = ws[j], ws[i]
		}
		q.Set("q", strings.ToUpper(strings.Join(ws, " ")))
		q.Set("sid", "0")
		u.RawQuery = q.Encode()
		fmt.Fprintf(f, "search\t%s\n", u)
	}
}

// siteRules are the generated site's rules: searches are matched by their words.
const siteRules = `# Generated by bench/gen: the synthetic benchmark site.
hosts: [www.bench.test, static.bench.test, img.bench.test, api.bench.test]
drop_params: [session, "_", sid]
endpoints:
  - name: search
    match: "GET /s"
    keep_params: [q, page]
    kind: search
    text_param: q
`
