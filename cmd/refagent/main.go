// Command refagent is pab's reference agent for smoke tests of pab run: it follows a
// scripted plan for its task (tasks/<id>/refagent.yaml), fetching pages through the replay
// proxy as a browser would open them, builds the answer from the pages with regular
// expressions and a template, and writes it where pab run asks (PAB_ANSWER_FILE).
//
// It reads the pab run contract (docs/run.md): PAB_TASK_ID, PAB_PROXY, PAB_CA_FILE and
// PAB_ANSWER_FILE. --mode makes it misbehave on purpose, for tests of the harness.
//
//	refagent --plans /path/to/repo/tasks
//	refagent --plans tasks --mode hang
package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"

	"go.yaml.in/yaml/v3"
)

// maxPlan bounds a plan file; maxPage a fetched page.
const (
	maxPlan = 1 << 20
	maxPage = 16 << 20
)

// Plan is a task's script (tasks/<id>/refagent.yaml).
type Plan struct {
	// Get are the URLs opened, in order, as documents (Sec-Fetch-Dest: document).
	Get []string `yaml:"get"`
	// Extract are values read from the pages with regular expressions.
	Extract []Extract `yaml:"extract"`
	// Answer is a text/template of the answer; its data are the extracted values by name
	// (a string, or a list of strings for all: true).
	Answer string `yaml:"answer"`
}

// Extract reads one value from one page: the first group of Regexp's first match (or of
// every match with All), HTML entities decoded.
type Extract struct {
	Name string `yaml:"name"`
	// Page is one of the Get URLs.
	Page string `yaml:"page"`
	// After, when set, starts the search after the first occurrence of this text.
	After  string `yaml:"after"`
	Regexp string `yaml:"regexp"`
	All    bool   `yaml:"all"`
	// Count, when set, is how many matches All must find.
	Count int `yaml:"count"`
}

func main() {
	plans := flag.String("plans", os.Getenv("REFAGENT_PLANS"), "directory holding <task>/refagent.yaml (the repository's tasks/; env REFAGENT_PLANS)")
	mode := flag.String("mode", envOr("REFAGENT_MODE", "ok"), "ok, or a misbehaviour: no-answer, huge, crash, orphan, hang, slow, egress (env REFAGENT_MODE)")
	cdp := flag.Bool("cdp", false, "also open each page in the browser at $PAB_CDP_URL (Chrome DevTools HTTP endpoints) and wait for it to load")
	counter := flag.String("counter", os.Getenv("REFAGENT_COUNTER"), "append one line per start to this file (env REFAGENT_COUNTER)")
	envDigest := flag.String("env-digest", "", "print the SHA-256 of this environment variable's value (never the value), to check a secret reached the agent")
	flag.Parse()
	if *envDigest != "" {
		if v, ok := os.LookupEnv(*envDigest); ok {
			sum := sha256.Sum256([]byte(v))
			fmt.Printf("refagent: env %s sha256 %s\n", *envDigest, hex.EncodeToString(sum[:]))
		} else {
			fmt.Printf("refagent: env %s unset\n", *envDigest)
		}
	}
	if *cdp {
		cdpURL = os.Getenv("PAB_CDP_URL")
		if cdpURL == "" {
			fmt.Fprintln(os.Stderr, "refagent: --cdp needs PAB_CDP_URL (http://HOST:PORT of the browser's DevTools)")
			os.Exit(1)
		}
	}
	if err := run(*plans, *mode, *counter); err != nil {
		fmt.Fprintln(os.Stderr, "refagent:", err)
		os.Exit(1)
	}
}

// cdpURL is the browser's DevTools address (--cdp), or empty.
var cdpURL string

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(plans, mode, counter string) error {
	id := os.Getenv("PAB_TASK_ID")
	answerFile := os.Getenv("PAB_ANSWER_FILE")
	if id == "" || answerFile == "" {
		return errors.New("PAB_TASK_ID and PAB_ANSWER_FILE must be set (run me with pab run, see docs/run.md)")
	}
	if counter != "" {
		f, err := os.OpenFile(counter, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "%s %s\n", id, os.Getenv("PAB_REPEAT"))
		f.Close()
	}
	fmt.Printf("refagent: task %s, mode %s\n", id, mode)
	switch mode {
	case "ok", "orphan", "slow":
	case "egress":
		return egress(answerFile)
	case "no-answer":
		fmt.Println("refagent: leaving without an answer")
		return nil
	case "huge":
		return os.WriteFile(answerFile, bytes.Repeat([]byte("spam "), 2<<20/5+1), 0o644)
	case "crash":
		fmt.Fprintln(os.Stderr, "refagent: crashing on purpose")
		os.Exit(3)
	case "hang":
		signal.Ignore(syscall.SIGTERM) // only SIGKILL ends it
		fmt.Println("refagent: hanging")
		select {}
	default:
		return fmt.Errorf("--mode %q: want ok, no-answer, huge, crash, orphan, hang or slow", mode)
	}
	if mode == "orphan" {
		// a child in the agent's process group that outlives it
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			return err
		}
		if err := os.WriteFile("orphan.pid", []byte(fmt.Sprint(c.Process.Pid)), 0o644); err != nil {
			return err
		}
	}
	if mode == "slow" {
		time.Sleep(2 * time.Second)
	}
	if plans == "" {
		return errors.New("--plans DIR (or REFAGENT_PLANS) is required: the directory holding <task>/refagent.yaml")
	}
	p, err := loadPlan(filepath.Join(plans, id, "refagent.yaml"))
	if err != nil {
		return err
	}
	client, err := newClient(os.Getenv("PAB_PROXY"), os.Getenv("PAB_CA_FILE"))
	if err != nil {
		return err
	}
	pages := map[string]string{}
	for _, u := range p.Get {
		if cdpURL != "" {
			if err := openInBrowser(cdpURL, u); err != nil {
				return err
			}
		}
		body, err := fetch(client, u)
		if err != nil {
			return err
		}
		pages[u] = body
	}
	answer, err := p.build(pages)
	if err != nil {
		return err
	}
	return atomicfile.Write(answerFile, []byte(answer), 0o644)
}

// loadPlan reads and checks a plan file.
func loadPlan(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPlan+1))
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if len(data) > maxPlan {
		return nil, fmt.Errorf("plan %s: over %d bytes", path, maxPlan)
	}
	var p Plan
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	if len(p.Get) == 0 || p.Answer == "" {
		return nil, fmt.Errorf("plan %s: needs get (URLs) and answer (a template)", path)
	}
	for _, e := range p.Extract {
		if e.Name == "" || e.Regexp == "" {
			return nil, fmt.Errorf("plan %s: every extract needs name and regexp", path)
		}
	}
	return &p, nil
}

// build extracts the values from the pages and fills the answer template.
func (p *Plan) build(pages map[string]string) (string, error) {
	data := map[string]any{}
	for _, e := range p.Extract {
		page, ok := pages[e.Page]
		if !ok {
			return "", fmt.Errorf("extract %s: page %q is not one of get", e.Name, e.Page)
		}
		if e.After != "" {
			i := strings.Index(page, e.After)
			if i < 0 {
				return "", fmt.Errorf("extract %s: %q not on %s", e.Name, e.After, e.Page)
			}
			page = page[i+len(e.After):]
		}
		re, err := regexp.Compile(e.Regexp)
		if err != nil {
			return "", fmt.Errorf("extract %s: %w", e.Name, err)
		}
		if re.NumSubexp() < 1 {
			return "", fmt.Errorf("extract %s: the regexp needs a group", e.Name)
		}
		if !e.All {
			m := re.FindStringSubmatch(page)
			if m == nil {
				return "", fmt.Errorf("extract %s: no match on %s", e.Name, e.Page)
			}
			data[e.Name] = clean(m[1])
			continue
		}
		var vals []string
		for _, m := range re.FindAllStringSubmatch(page, -1) {
			vals = append(vals, clean(m[1]))
		}
		if e.Count > 0 && len(vals) != e.Count {
			return "", fmt.Errorf("extract %s: %d matches on %s, want %d", e.Name, len(vals), e.Page, e.Count)
		}
		data[e.Name] = vals
	}
	t, err := template.New("answer").Funcs(template.FuncMap{"join": strings.Join}).Option("missingkey=error").Parse(p.Answer)
	if err != nil {
		return "", fmt.Errorf("answer template: %w", err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("answer template: %w", err)
	}
	return buf.String(), nil
}

func clean(s string) string { return strings.TrimSpace(html.UnescapeString(s)) }

// newClient makes an HTTP client that sends everything through the proxy and trusts only
// pab's CA.
func newClient(proxy, caFile string) (*http.Client, error) {
	if proxy == "" || caFile == "" {
		return nil, errors.New("PAB_PROXY and PAB_CA_FILE must be set")
	}
	pu, err := url.Parse(proxy)
	if err != nil || pu.Host == "" {
		return nil, fmt.Errorf("PAB_PROXY %q: want http://HOST:PORT", proxy)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("PAB_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("PAB_CA_FILE %s: no certificate", caFile)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, nil
}

// fetch opens u as a page (Sec-Fetch-Dest: document) and returns its body.
func fetch(c *http.Client, u string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("User-Agent", "pab-refagent/1")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	fmt.Printf("refagent: GET %s: %d, %d bytes\n", u, resp.StatusCode, len(body))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	return string(body), nil
}
