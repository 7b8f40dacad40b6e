package replay

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/rules"
	"github.com/pab-dev/pab/warc"
)

// TestChromiumSPKI loads a replayed real https page in headless Chromium that trusts the
// proxy only through --ignore-certificate-errors-spki-list with the CA's SPKI hash (no
// --ignore-certificate-errors): this needs the CA certificate in the served chain. It
// checks the page's title and that the page and its subresources were answered from the
// recording over HTTP/1.1. Skipped when chromium is not installed.
func TestChromiumSPKI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed")
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if _, err := warc.ImportWARCs([]string{filepath.Join("..", "testdata", "sites", "lil-projects.warc.gz")}, dir, warc.ImportOptions{TaskID: "lil"}); err != nil {
		t.Fatal(err)
	}
	b, err := warc.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := rules.Default()
	if err != nil {
		t.Fatal(err)
	}
	ix, err := NewIndex(b, rs)
	if err != nil {
		t.Fatal(err)
	}
	tp := startProxyBundle(t, b, nil, func(o *Options) { o.Index = ix })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-features=NetworkTimeServiceQuerying,HttpsUpgrades",
		"--user-data-dir=" + t.TempDir(),
		"--proxy-server=http://" + tp.addr, "--proxy-bypass-list=<-loopback>",
		"--ignore-certificate-errors-spki-list=" + tp.ca.SPKIHash(),
		"--virtual-time-budget=5000", "--dump-dom", "https://lil.law.harvard.edu/projects/",
	}
	cmd := exec.CommandContext(ctx, chromium, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if !strings.Contains(string(out), "<title>Projects") {
		t.Fatalf("page not loaded; DOM starts %.300q", out)
	}
	lines := tp.logLines(t)
	page, sub := false, 0
	for _, l := range lines {
		if !strings.Contains(l.URL, "lil.law.harvard.edu") {
			continue
		}
		if l.URL == "https://lil.law.harvard.edu/projects/" && l.Source == SourceExact && l.Type == TypeDocument {
			page = true
		} else if l.Source == SourceExact {
			sub++
		}
	}
	if !page || sub == 0 {
		t.Errorf("log: page answered %v, %d subresources answered from the recording; log:\n%+v", page, sub, lines)
	}
	t.Logf("%d requests, page exact, %d subresources exact", len(lines), sub)
	for _, l := range lines {
		if l.Source != SourceExact {
			t.Logf("  %s %s %s %s %d %s", l.Source, l.Type, l.Method, l.URL, l.Status, l.Note)
		}
	}
}
