package importer

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/tlsca"
)

// TestSessionThenFinish: a record.Session on a free loopback port forwards a page of a
// loopback site and stores it; once its context ends it prints the counts, and
// FinishRecording builds the bundle from the journal, removes the journal and imports the
// bundle into the task (self-checked, as every recording is), whose recording then holds
// the page.
func TestSessionThenFinish(t *testing.T) {
	repo := testRepo(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>Shop</title></head><body>price 12.34</body></html>")
	}))
	defer site.Close()
	ca, err := tlsca.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	logR, logW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- record.Session(ctx, record.SessionOptions{Recorder: record.Options{WorkDir: work, CA: ca}, TaskID: "shop",
			Listen: "127.0.0.1:0", Capture: record.Capture{Timezone: "UTC", TZFrom: "--timezone"}, Log: logW})
		logW.Close()
	}()
	// the log read as it comes: the session writes its banner before it serves
	addrC, logC := make(chan string, 1), make(chan string, 1)
	go func() {
		var log strings.Builder
		lines := bufio.NewScanner(logR)
		for lines.Scan() {
			log.WriteString(lines.Text() + "\n")
			if m := regexp.MustCompile(`^pab record: recording task shop on http://(\S+)$`).FindStringSubmatch(lines.Text()); m != nil {
				addrC <- m[1]
			}
		}
		close(addrC)
		logC <- log.String()
	}()
	addr, ok := <-addrC
	if !ok {
		t.Fatalf("no address line:\n%s", <-logC)
	}
	proxy, _ := url.Parse("http://" + addr)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	resp, err := client.Get(site.URL + "/item")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "price 12.34") {
		t.Errorf("through the proxy: %q", body)
	}
	cancel()
	err = <-done
	log := <-logC
	if err != nil {
		t.Fatalf("session: %v\n%s", err, log)
	}
	if !strings.Contains(log, "pab record: stopping\npab record: 1 exchange stored, 0 not stored, 0 upstream errors") {
		t.Errorf("session log:\n%s", log)
	}

	var out, errOut bytes.Buffer
	err = FinishRecording(context.Background(), FinishOptions{WorkDir: work, Capture: record.Capture{Timezone: "UTC"},
		Import: Options{Repo: repo, TaskID: "shop", Out: &out, ErrOut: &errOut}})
	if err != nil {
		t.Fatalf("finish: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.HasPrefix(out.String(), "recorded 1 exchange, 0 pages into "+filepath.Join(work, "bundle-")) ||
		!strings.Contains(out.String(), "+ hand-written         hit rate 100.0%  (exact 1,") {
		t.Errorf("finish report:\n%s", out.String())
	}
	if _, err := os.Stat(record.JournalPath(work)); !os.IsNotExist(err) {
		t.Errorf("the journal is left: %v", err)
	}
	got := recordedURLs(t, filepath.Join(repo.TasksDir(), "shop", "recording"))
	if !slices.Equal(got, []string{"GET " + site.URL + "/item"}) {
		t.Errorf("recorded %v", got)
	}
	if des, _ := filepath.Glob(filepath.Join(work, "bundle-*")); len(des) > 0 {
		t.Errorf("the imported bundle is left: %v", des)
	}
}
