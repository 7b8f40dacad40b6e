package importer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pab-dev/pab/record"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/task"
	"github.com/pab-dev/pab/tlsca"
)

// multipartForm is an upload form's body: a text field, a file and a second field, with
// the given boundary; file is the uploaded file's content.
func multipartForm(t *testing.T, boundary string, file []byte) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if err := mw.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	mw.WriteField("name", "Ada Lovelace")
	fw, err := mw.CreateFormFile("resume", "resume.txt")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(file)
	mw.WriteField("consent", "yes")
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), mw.FormDataContentType()
}

// serveTask serves the task id of repo as pab replay does (task.Open, then replay.New on a
// loopback port) and returns an HTTP client whose proxy it is, and stop, which stops the
// replay (once) and returns its log.
func serveTask(t *testing.T, repo *task.Repo, id string) (client *http.Client, stop func() string) {
	t.Helper()
	o, err := task.Open(id, repo, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	ca, err := tlsca.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	srv, err := replay.New(replay.Options{Bundle: o.Bundle, Index: o.Index, Rules: o.Rules, CA: ca, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var once sync.Once
	stop = func() string {
		once.Do(func() { srv.Close(); <-served })
		return log.String()
	}
	t.Cleanup(func() { stop() })
	proxy, _ := url.Parse("http://" + ln.Addr().String())
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}, stop
}

// postForm posts body as contentType to u through client and returns the status and answer.
func postForm(t *testing.T, client *http.Client, u, contentType string, body []byte) (int, string) {
	t.Helper()
	resp, err := client.Post(u, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkFormReplays posts the recorded form to u through the replay of task id three
// times: with the boundary it was recorded with, with a fresh boundary (as a browser
// sends it again), both answered with the recorded answer; and with another file in it,
// which is a miss.
func checkFormReplays(t *testing.T, repo *task.Repo, id, u, recordedBoundary string, file []byte, answer string) {
	t.Helper()
	client, _ := serveTask(t, repo, id)
	for _, boundary := range []string{recordedBoundary, "fresh-boundary-7MA4YWxkTrZu0gW"} {
		body, ct := multipartForm(t, boundary, file)
		if status, got := postForm(t, client, u, ct, body); status != http.StatusCreated || got != answer {
			t.Errorf("boundary %q: replay answered %d %q, want 201 %q", boundary, status, got, answer)
		}
	}
	body, ct := multipartForm(t, "fresh-boundary-7MA4YWxkTrZu0gW", append([]byte("another "), file...))
	if status, _ := postForm(t, client, u, ct, body); status != http.StatusNotFound {
		t.Errorf("another file: replay answered %d, want the miss 404", status)
	}
}

// TestRecordMultipartReplays: an upload form (a field, a file, a field) posted through pab
// record is replayed from the imported recording when the browser posts it again, with
// the recorded boundary and with a fresh one; a form with another file is not.
func TestRecordMultipartReplays(t *testing.T) {
	repo := testRepo(t)
	file := []byte("Ada Lovelace\nAnalyst, Analytical Engine\n")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, _, err := r.FormFile("resume")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got, _ := io.ReadAll(f)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"stored":%d,"name":%q}`, len(got), r.FormValue("name"))
	}))
	defer site.Close()
	answer := fmt.Sprintf(`{"stored":%d,"name":"Ada Lovelace"}`, len(file))

	ca, err := tlsca.LoadDefault()
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	logR, logW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- record.Session(ctx, record.SessionOptions{Recorder: record.Options{WorkDir: work, CA: ca}, TaskID: "apply",
			Listen: "127.0.0.1:0", Capture: record.Capture{Timezone: "UTC", TZFrom: "--timezone"}, Log: logW})
		logW.Close()
	}()
	addrC := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(logR)
		for lines.Scan() {
			if m := regexp.MustCompile(`^pab record: recording task apply on http://(\S+)$`).FindStringSubmatch(lines.Text()); m != nil {
				addrC <- m[1]
			}
		}
		close(addrC)
	}()
	addr, ok := <-addrC
	if !ok {
		t.Fatal("pab record printed no address line")
	}
	proxy, _ := url.Parse("http://" + addr)
	recClient := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	const recordedBoundary = "----WebKitFormBoundaryx8QbLqPm2Ev0RkZa"
	body, ct := multipartForm(t, recordedBoundary, file)
	if status, got := postForm(t, recClient, site.URL+"/apply", ct, body); status != http.StatusCreated || got != answer {
		t.Fatalf("through pab record: %d %q", status, got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("session: %v", err)
	}
	var out, errOut bytes.Buffer
	err = FinishRecording(context.Background(), FinishOptions{WorkDir: work, Capture: record.Capture{Timezone: "UTC"},
		Import: Options{Repo: repo, TaskID: "apply", Out: &out, ErrOut: &errOut}})
	if err != nil {
		t.Fatalf("finish: %v\n%s%s", err, out.String(), errOut.String())
	}
	checkFormReplays(t, repo, "apply", site.URL+"/apply", recordedBoundary, file, answer)
}

// TestImportMultipartReplays: a WARC holding an upload form's POST (request and response
// records, as a browser's capture writes them) imported with pab import is replayed when
// the form is posted again with the recorded boundary and with a fresh one; a form with
// another file is not.
func TestImportMultipartReplays(t *testing.T) {
	repo := testRepo(t)
	file := []byte("%PDF-1.4 not really a PDF\x00\x01\x02\n")
	const u = "http://jobs.example/apply"
	const recordedBoundary = "----geckoformboundary5d1a2e61f0"
	answer := `{"ok":true}`
	body, ct := multipartForm(t, recordedBoundary, file)

	var w bytes.Buffer
	record := func(typ, msg string) {
		fmt.Fprintf(&w, "WARC/1.0\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:%s>\r\nWARC-Date: 2024-03-05T10:00:00Z\r\n"+
			"WARC-Target-URI: %s\r\nContent-Type: application/http; msgtype=%s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
			typ, map[string]string{"request": "6f1c2a8e-1b7d-4c2e-9a10-000000000001", "response": "6f1c2a8e-1b7d-4c2e-9a10-000000000002"}[typ],
			u, typ, len(msg), msg)
	}
	record("request", fmt.Sprintf("POST /apply HTTP/1.1\r\nHost: jobs.example\r\nContent-Type: %s\r\nContent-Length: %d\r\n"+
		"Sec-Fetch-Dest: empty\r\n\r\n%s", ct, len(body), body))
	record("response", fmt.Sprintf("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer))
	in := filepath.Join(t.TempDir(), "upload.warc")
	if err := os.WriteFile(in, w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if _, err := Run(context.Background(), Options{Repo: repo, TaskID: "jobs", Inputs: []string{in}, Command: "pab import",
		Out: &out, ErrOut: &errOut}); err != nil {
		t.Fatalf("import: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "hit rate 100.0%") {
		t.Errorf("self-check:\n%s", out.String())
	}
	checkFormReplays(t, repo, "jobs", u, recordedBoundary, file, answer)
}
