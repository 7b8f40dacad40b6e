package importer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
)

// openRecording opens the published recording of task id in place.
func openRecording(t *testing.T, dir string) *recording.Bundle {
	t.Helper()
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestRunImportsHAR: a HAR (sniffed by content: its name ends in .har but any would do)
// becomes a recording: HTTP/2 pseudo-headers gone, lower-case names canonical, the
// Content-Encoding of the decoded body dropped and its Content-Length right, Set-Cookie
// redacted and Cookie stripped as for any import, a base64 body decoded, the page from the
// HAR's pages, the locale from its Accept-Language, and the body the capture left out
// kept as an unresolved exchange (replayed as a miss), said on stdout and stderr.
func TestRunImportsHAR(t *testing.T) {
	repo := testRepo(t)
	in := filepath.Join(t.TempDir(), "capture.json") // not named .har: sniffed by content
	data, err := os.ReadFile("testdata/handmade.har")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(in, data, 0o644)
	var out, errOut bytes.Buffer
	o := Options{Repo: repo, TaskID: "har", Inputs: []string{in}, Command: "pab import", Out: &out, ErrOut: &errOut}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "3 entries: 3 exchanges (1 with a body not captured: replayed as misses)") ||
		!strings.Contains(out.String(), "locale de-CH") {
		t.Errorf("stdout:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "entry 2 (GET http://shop.test/api/items): response body not captured") {
		t.Errorf("stderr:\n%s", errOut.String())
	}
	b := openRecording(t, res.RecordingDir)
	if b.Manifest.Locale != "de-CH" {
		t.Errorf("manifest locale %q", b.Manifest.Locale)
	}
	if len(b.Entries) != 3 {
		t.Fatalf("%d entries", len(b.Entries))
	}
	home, logo, api := &b.Entries[0], &b.Entries[1], &b.Entries[2]
	r, err := b.Response(home)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	if string(body) != "<html><title>Shop</title><p>hi</p></html>" || r.Header.Get("Content-Encoding") != "" ||
		r.Header.Get("Content-Length") != "41" || r.Header.Get("Set-Cookie") != "REDACTED" || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("home: %q %v", body, r.Header)
	}
	for k := range r.Header {
		if strings.HasPrefix(k, ":") {
			t.Errorf("pseudo-header %s kept", k)
		}
	}
	if home.ResourceType != "document" {
		t.Errorf("home type %q", home.ResourceType)
	}
	pages, _ := b.AllPages()
	if len(pages) != 1 || pages[0].URL != "http://shop.test/" || pages[0].Title != "Shop" {
		t.Errorf("pages %+v", pages)
	}
	if r, err := b.Response(logo); err != nil {
		t.Error(err)
	} else if png, _ := io.ReadAll(r.Body); string(png) != "\x89PNG" {
		t.Errorf("logo %q", png)
	}
	if !api.Unresolved {
		t.Errorf("api entry not kept as not captured: %+v", api)
	}
	if _, err := b.Response(api); err == nil {
		t.Errorf("a body not captured has a response")
	}
	reqs := unpackedWARC(t, res.RecordingDir)
	if strings.Contains(reqs, "secret") || strings.Contains(reqs, "\nCookie:") {
		t.Errorf("a Cookie was kept:\n%s", reqs)
	}
	if !strings.Contains(reqs, "Accept-Language: de-CH") || !strings.Contains(reqs, "Host: shop.test") {
		t.Errorf("request heads:\n%s", reqs)
	}
}

// unpackedWARC returns the text of the recording's data.warc, unpacked.
func unpackedWARC(t *testing.T, dir string) string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "b")
	if err := recording.Unpack(dir, bundle); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(bundle, "archive", "data.warc"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestRunRefusesBadHAR: a truncated HAR, one with an entry without request, a text past
// the bound and an attached file outside the HAR's folder are refused with the entry's
// index, and nothing is written.
func TestRunRefusesBadHAR(t *testing.T) {
	repo := testRepo(t)
	data, err := os.ReadFile("testdata/handmade.har")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	cases := map[string]struct{ data, want string }{
		"truncated":  {s[:strings.Index(s, `/api/items`)], "entry 2: the file ends here (truncated JSON)"},
		"no request": {strings.Replace(s, `"request":{"method":"GET","url":"http://shop.test/logo.png"`, `"req":{"method":"GET","url":"http://shop.test/logo.png"`, 1), "entry 1: request: missing"},
		"traversal":  {strings.Replace(s, `"text":"iVBORw==","encoding":"base64"`, `"_file":"../../etc/passwd"`, 1), `entry 1 (GET http://shop.test/logo.png): response.content._file: _file "../../etc/passwd" is a path`},
		"bad header": {strings.Replace(s, `"name":"Content-Type","value":"image/png"`, `"name":"Content Type","value":"image/png"`, 1), `response.headers[0].name "Content Type" is not an HTTP field name`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "bad.har")
			os.WriteFile(in, []byte(c.data), 0o644)
			o := Options{Repo: repo, TaskID: "bad", Inputs: []string{in}, NoCheck: true, Command: "pab import"}
			_, err := Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), in) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, in, c.want)
			}
			if _, err := os.Stat(filepath.Join(repo.TasksDir(), "bad")); !os.IsNotExist(err) {
				t.Errorf("the refused import left tasks/bad: %v", err)
			}
		})
	}
}

// TestRunHARSkips: entries that got no answer (status 0), that are not http(s) and
// WebSocket handshakes are skipped and counted, not refused.
func TestRunHARSkips(t *testing.T) {
	repo := testRepo(t)
	entry := func(url string, status int) string {
		return fmt.Sprintf(`{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"GET","url":%q,"headers":[]},"response":{"status":%d,"headers":[{"name":"Content-Type","value":"text/html"}],"content":{"size":2,"mimeType":"text/html","text":"<p>"}}}`, url, status)
	}
	data := `{"log":{"version":"1.2","entries":[` + strings.Join([]string{entry("https://a.test/", 200), entry("https://a.test/gone", 0),
		entry("data:text/html,x", 200), entry("wss://a.test/ws", 101), entry("https://a.test/ws", 101)}, ",") + `]}}`
	in := filepath.Join(t.TempDir(), "skips.har")
	os.WriteFile(in, []byte(data), 0o644)
	var out bytes.Buffer
	if _, err := Run(context.Background(), Options{Repo: repo, TaskID: "skips", Inputs: []string{in}, NoCheck: true, Command: "pab import", Out: &out}); err != nil {
		t.Fatal(err)
	}
	want := "5 entries: 1 exchange, 1 skipped (WebSocket), 1 skipped (no response (status 0)), 2 skipped (not http(s))"
	if !strings.Contains(out.String(), want) {
		t.Errorf("stdout:\n%s\nwant %q", out.String(), want)
	}
}
