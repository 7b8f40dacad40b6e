package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pab-dev/pab/tools/applyfixture/hostile"
)

// fixture starts the handler over real TLS on loopback and returns a client that sends
// every request to it whatever the URL's host, trusting only the fixture's CA.
func fixture(t *testing.T) *http.Client {
	t.Helper()
	h, err := Handler()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := newFixtureTLS(Hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = tl.Config
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(tl.CAPEM) {
		t.Fatal("CA PEM not parsed")
	}
	addr := srv.Listener.Addr().String()
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func post(t *testing.T, c *http.Client, u, ctype string, body []byte) (*http.Response, string) {
	t.Helper()
	resp, err := c.Post(u, ctype, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestEveryHostServesOverTLS(t *testing.T) {
	c := fixture(t)
	for _, tc := range []struct{ url, title string }{
		{"https://" + HostGreenhouse + AxonJobPath, "<title>Job Application for Senior Software Engineer II  at Axon</title>"},
		{"https://" + HostTeamtailor + HarperJobPath, "<title>Senior Software Engineer - Harper</title>"},
		{"https://" + HostAcme + "/", "<title>Open roles – Acme Robotics Careers</title>"},
		{"https://" + HostEvil + EvilApplyPath + "?job=107", "<title>Partner Careers Portal – Apply now</title>"},
		{"https://" + HostHostile + hostile.Pages[0].Path, "<title>" + hostile.Pages[0].Title + " – Hostile Labs Careers</title>"},
	} {
		resp, body := get(t, c, tc.url)
		if resp.StatusCode != 200 || !strings.Contains(body, tc.title) {
			t.Errorf("GET %s: status %d, title %q missing", tc.url, resp.StatusCode, tc.title)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", tc.url, ct)
		}
	}
}

func TestSavedPagesServedAsSaved(t *testing.T) {
	c := fixture(t)
	harper, _ := fs.ReadFile(pagesFS, "pages/corpus/teamtailor-harper.html")
	if _, body := get(t, c, "https://"+HostTeamtailor+HarperJobPath); body != string(harper) {
		t.Errorf("Harper page: served %d bytes, saved %d: not identical", len(body), len(harper))
	}
	axon, _ := fs.ReadFile(pagesFS, "pages/corpus/greenhouse-axon.html")
	_, body := get(t, c, "https://"+HostGreenhouse+AxonJobPath+"?gh_src=cdbb51d93us")
	tag := `<script src="` + AxonShimPath + `"></script>`
	if strings.Replace(body, tag, "", 1) != string(axon) || !strings.Contains(body, tag+"</body>") {
		t.Errorf("Axon page: want the saved bytes with only %s added before </body>", tag)
	}
	resp, js := get(t, c, "https://"+HostGreenhouse+AxonShimPath)
	if resp.StatusCode != 200 || !strings.Contains(js, AxonApplicationsPath) {
		t.Errorf("shim: status %d, does not post to %s", resp.StatusCode, AxonApplicationsPath)
	}
}

func TestAcmePages(t *testing.T) {
	c := fixture(t)
	for _, p := range AcmePages {
		resp, body := get(t, c, "https://"+HostAcme+p.Path)
		switch p.ID {
		case "109":
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, AcmeChallengePath+"?next=") {
				t.Errorf("109: status %d Location %q, want 302 to %s", resp.StatusCode, loc, AcmeChallengePath)
			}
		case "110":
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Just a moment...") {
				t.Errorf("110: status %d, want 403 with the Cloudflare interstitial", resp.StatusCode)
			}
		default:
			if resp.StatusCode != 200 || !strings.Contains(body, "<title>") {
				t.Errorf("%s %s: status %d", p.ID, p.Path, resp.StatusCode)
			}
			if p.Action != "" && !strings.Contains(body, p.Action) {
				t.Errorf("%s: page does not name its action %s", p.ID, p.Action)
			}
		}
	}
	if _, body := get(t, c, "https://"+HostAcme+AcmeChallengePath); !strings.Contains(body, "g-recaptcha") {
		t.Error("challenge page has no reCAPTCHA")
	}
	if resp, _ := get(t, c, "https://"+HostAcme+AcmeButtonImagePath); resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("button image: Content-Type %q", resp.Header.Get("Content-Type"))
	}
}

func TestAcmeFormAnswers(t *testing.T) {
	c := fixture(t)
	full := url.Values{"first_name": {"Jane"}, "last_name": {"Doe"}, "email": {"jane.doe@example.com"}, "privacy_consent": {"1"}}
	for _, id := range []string{"101", "102", "104", "105", "106", "111"} {
		u := "https://" + HostAcme + "/jobs/" + id + "/applications"
		resp, body := post(t, c, u, "application/x-www-form-urlencoded", []byte(full.Encode()))
		if resp.StatusCode != 200 || !strings.Contains(body, "Thank you for applying!") || !strings.Contains(body, "ACME-"+id) {
			t.Errorf("POST %s: status %d, no confirmation: %s", u, resp.StatusCode, body)
		}
		if strings.Contains(body, "jane.doe@example.com") {
			t.Errorf("POST %s: the confirmation echoes a value", u)
		}
		resp, body = post(t, c, u, "application/x-www-form-urlencoded", []byte("first_name=Jane"))
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "<li class=\"error\">email</li>") {
			t.Errorf("POST %s without email: status %d: %s", u, resp.StatusCode, body)
		}
	}
	// multipart with a file, German
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"vorname": "Jane", "nachname": "Doe", "email": "jane.doe@example.com", "datenschutz": "1"} {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("lebenslauf", "resume.pdf")
	fw.Write([]byte("%PDF-1.4\n"))
	mw.Close()
	resp, body := post(t, c, "https://"+HostAcme+"/de/stellen/113/bewerbung", mw.FormDataContentType(), buf.Bytes())
	if resp.StatusCode != 200 || !strings.Contains(body, "Vielen Dank für Ihre Bewerbung") || !strings.Contains(body, "lebenslauf") {
		t.Errorf("German POST: status %d: %s", resp.StatusCode, body)
	}
	resp, body = post(t, c, "https://"+HostAcme+"/ja/jobs/114/applications", "application/x-www-form-urlencoded", nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "必須項目") {
		t.Errorf("Japanese empty POST: status %d: %s", resp.StatusCode, body)
	}
	// JSON (page 103)
	u := "https://" + HostAcme + "/jobs/103/applications"
	resp, body = post(t, c, u, "application/json", []byte(`{"first_name":"Jane","last_name":"Doe","email":"j@example.com"}`))
	var ok struct {
		ConfirmationURL string `json:"confirmation_url"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &ok) != nil || ok.ConfirmationURL != AcmeConfirmation103 {
		t.Errorf("JSON POST: status %d: %s", resp.StatusCode, body)
	}
	for _, bad := range []struct {
		ctype, body string
		status      int
	}{
		{"application/json", `{"first_name":"Jane"}`, http.StatusUnprocessableEntity},
		{"application/json", `[1,2]`, http.StatusBadRequest},
		{"application/json", `{`, http.StatusBadRequest},
		{"text/plain", `{}`, http.StatusUnsupportedMediaType},
	} {
		if resp, body := post(t, c, u, bad.ctype, []byte(bad.body)); resp.StatusCode != bad.status {
			t.Errorf("JSON POST %s %q: status %d, want %d: %s", bad.ctype, bad.body, resp.StatusCode, bad.status, body)
		}
	}
	// a body over the bound
	big := bytes.Repeat([]byte("a"), maxForm+10)
	if resp, _ := post(t, c, "https://"+HostAcme+"/jobs/101/applications", "application/x-www-form-urlencoded", append([]byte("first_name="), big...)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized form: status %d, want 413", resp.StatusCode)
	}
	if resp, _ := post(t, c, u, "application/json", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized JSON: status %d, want 413", resp.StatusCode)
	}
}

func TestVendorAnswers(t *testing.T) {
	c := fixture(t)
	u := "https://" + HostTeamtailor + HarperApplyPath
	good := url.Values{"candidate[first_name]": {"Jane"}, "candidate[last_name]": {"Doe"}, "candidate[email]": {"j@example.com"},
		"candidate[consent_given]": {"0", "1"}}
	if resp, body := post(t, c, u, "application/x-www-form-urlencoded", []byte(good.Encode())); resp.StatusCode != 200 || !strings.Contains(body, "Thank you for applying!") {
		t.Errorf("Harper POST: status %d: %s", resp.StatusCode, body)
	}
	good["candidate[consent_given]"] = []string{"0"} // the hidden field only: the box is unticked
	if resp, body := post(t, c, u, "application/x-www-form-urlencoded", []byte(good.Encode())); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Privacy Policy") {
		t.Errorf("Harper POST without consent: status %d: %s", resp.StatusCode, body)
	}
	g := "https://" + HostGreenhouse + AxonApplicationsPath
	if resp, body := post(t, c, g, "application/json", []byte(`{"first_name":"Jane","last_name":"Doe","email":"j@example.com"}`)); resp.StatusCode != http.StatusCreated || !strings.Contains(body, AxonConfirmationPath) {
		t.Errorf("Greenhouse POST: status %d: %s", resp.StatusCode, body)
	}
	if resp, body := post(t, c, g, "application/json", []byte(`{"first_name":""}`)); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "can't be blank") {
		t.Errorf("Greenhouse empty POST: status %d: %s", resp.StatusCode, body)
	}
	if _, body := get(t, c, "https://"+HostGreenhouse+AxonConfirmationPath); !strings.Contains(body, "Thank you for applying") {
		t.Error("Greenhouse confirmation page")
	}
}

func TestNotFound(t *testing.T) {
	c := fixture(t)
	for _, u := range []string{
		"https://" + HostAcme + "/pab-not-found-0123456789ab",
		"https://" + HostGreenhouse + "/axon/jobs/Job%20Application_files/api.js",
		"https://" + HostEvil + "/collect",
	} {
		resp, body := get(t, c, u)
		if resp.StatusCode != 404 || !strings.Contains(body, "<title>Page not found</title>") {
			t.Errorf("GET %s: status %d, want the HTML 404 page", u, resp.StatusCode)
		}
	}
	// a GET to a POST-only action is not the form's answer
	if resp, _ := get(t, c, "https://"+HostAcme+"/jobs/101/applications"); resp.StatusCode == 200 {
		t.Error("GET of a form action answered 200")
	}
}

func TestRunArguments(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"serve", "-listen", "0.0.0.0:0"},
		{"serve", "-listen", "nonsense"},
		{"serve", "extra"},
		{"serve", "-log", filepath.Join(t.TempDir(), "missing", "requests.jsonl")},
		{"drive", "-site", "acme"},
		{"drive", "-site", "nope", "-proxy", "127.0.0.1:1", "-spki", "x", "-files", t.TempDir()},
	} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

// TestHostilePages: every hostile page is served with its application form (First Name,
// Email, a POST action on its own host) and names each of its sinks; the POST action
// answers with a confirmation page that names the fields, never their values; every sink
// answers 204 to any method; the service worker is JavaScript.
func TestHostilePages(t *testing.T) {
	c := fixture(t)
	base := "https://" + HostHostile
	seen := map[string]bool{}
	for _, p := range hostile.Pages {
		if seen[p.ID] || seen[p.Path] {
			t.Errorf("%s: id or path used twice", p.ID)
		}
		seen[p.ID], seen[p.Path] = true, true
		if p.Path != "/hostile/"+p.ID || p.Class == "" || p.Trigger == "" || len(p.Sinks) == 0 {
			t.Errorf("%s: incomplete table row %+v", p.ID, p)
		}
		resp, body := get(t, c, base+p.Path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(body, "<title>"+p.Title+" – Hostile Labs Careers</title>") {
			t.Errorf("GET %s: status %d %q", p.Path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, want := range []string{`>First Name</label>`, `>Email</label>`, `method="post" action="` + hostile.Submit(p.ID) + `"`, "written for pab"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the page lacks %q", p.ID, want)
			}
		}
		if name, ok := strings.CutPrefix(p.Trigger, "click:"); ok && !strings.Contains(body, ">"+name+"</button>") {
			t.Errorf("%s: no button %q", p.ID, name)
		}
		if name, ok := strings.CutPrefix(p.Trigger, "link:"); ok && !strings.Contains(body, ">"+name+"</a>") {
			t.Errorf("%s: no link %q", p.ID, name)
		}
		for _, sk := range p.Sinks {
			id, name, ok := hostile.Locate(sk)
			if !ok || id != p.ID {
				t.Errorf("%s: sink %s is located as %q %q %v", p.ID, sk, id, name, ok)
			}
			if name != "submit" && !strings.Contains(body, `"`+name+`"`) && !strings.Contains(body, "sw.js") {
				t.Errorf("%s: the page never names its sink %q", p.ID, name)
			}
		}
		form := url.Values{"first_name": {"Jane"}, "email": {"jane.doe@example.com"}}
		resp, body = post(t, c, base+hostile.Submit(p.ID), "application/x-www-form-urlencoded", []byte(form.Encode()))
		if resp.StatusCode != 200 || !strings.Contains(body, "Thank you for applying!") || !strings.Contains(body, "Fields received: email, first_name") {
			t.Errorf("POST %s: status %d: %s", hostile.Submit(p.ID), resp.StatusCode, body)
		}
		if strings.Contains(body, "jane.doe") {
			t.Errorf("POST %s: the confirmation echoes a value", hostile.Submit(p.ID))
		}
		for _, method := range []string{"GET", "POST", "PUT"} {
			req, _ := http.NewRequest(method, base+hostile.Sink(p.ID, "anything")+"?e=x", strings.NewReader("PING"))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("%s %s sink: status %d, want 204", method, p.ID, resp.StatusCode)
			}
		}
	}
	for _, a := range hostile.Assets {
		resp, _ := get(t, c, base+a.Path)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != a.ContentType {
			t.Errorf("GET %s: status %d, Content-Type %q, want %q", a.Path, resp.StatusCode, resp.Header.Get("Content-Type"), a.ContentType)
		}
	}
	if resp, _ := get(t, c, base+"/hostile/no-such-page"); resp.StatusCode != 404 {
		t.Errorf("unknown hostile page: status %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, base+hostile.Submit("shadow-form")); resp.StatusCode == 200 {
		t.Error("GET of a hostile POST action answered 200")
	}
	for _, tc := range []struct{ path, page, sink string }{
		{"/hostile/get-markup/sink/srcset", "get-markup", "srcset"},
		{"/hostile/shadow-form/submit", "shadow-form", "submit"},
		{"/hostile/ping", "ping", ""},
		{"/hostile/sw.js", "", ""},
		{"/jobs/101/apply", "", ""},
	} {
		page, sink, _ := hostile.Locate(tc.path)
		if page != tc.page || sink != tc.sink {
			t.Errorf("Locate(%q) = %q %q, want %q %q", tc.path, page, sink, tc.page, tc.sink)
		}
	}
}

// TestRequestLog: the log records every request (method, host, full URL, Cookie, the first
// 64 KiB of the body, time) as whole JSON lines from concurrent handlers, in a file and in
// memory, and the handler still reads the whole body.
func TestRequestLog(t *testing.T) {
	h, err := Handler()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := NewRequestLog(f, true)
	tl, err := newFixtureTLS(Hosts, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(l.Wrap(h))
	srv.TLS = tl.Config
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(tl.CAPEM)
	addr := srv.Listener.Addr().String()
	c := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}, Timeout: 10 * time.Second}
	const n = 20
	big := "pad=" + strings.Repeat("a", MaxLoggedBody) + "&email=jane.doe%40example.com"
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var req *http.Request
			if i%2 == 0 {
				req, _ = http.NewRequest("GET", "https://"+HostHostile+hostile.Sink("cookie", "next")+"?i="+fmt.Sprint(i), nil)
				req.Header.Set("Cookie", "e=jane.doe@example.com")
			} else {
				req, _ = http.NewRequest("POST", "https://"+HostHostile+hostile.Submit("shadow-form")+"?i="+fmt.Sprint(i), strings.NewReader(big))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if i%2 == 1 && (resp.StatusCode != 200 || !strings.Contains(string(b), "Fields received: email, pad")) {
				t.Errorf("POST %d: the handler did not get the whole body: %d %s", i, resp.StatusCode, b)
			}
		}(i)
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != n || len(l.Entries()) != n {
		t.Fatalf("%d lines, %d entries; want %d each", len(lines), len(l.Entries()), n)
	}
	gets, postsSeen := 0, 0
	for _, line := range lines {
		var e LogEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %.200q", line)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || e.Host != HostHostile || !strings.HasPrefix(e.URL, "https://"+HostHostile+"/hostile/") || !strings.Contains(e.URL, "?i=") {
			t.Errorf("entry %+v", e)
		}
		switch e.Method {
		case "GET":
			gets++
			if e.Cookie != "e=jane.doe@example.com" || e.Body != "" {
				t.Errorf("GET entry: cookie %q body %.20q", e.Cookie, e.Body)
			}
		case "POST":
			postsSeen++
			if len(e.Body) != MaxLoggedBody || !e.BodyTruncated || e.Body != big[:MaxLoggedBody] || e.ContentType != "application/x-www-form-urlencoded" {
				t.Errorf("POST entry: body %d bytes, truncated %v", len(e.Body), e.BodyTruncated)
			}
		}
	}
	if gets != n/2 || postsSeen != n/2 {
		t.Errorf("%d GETs and %d POSTs logged, want %d each", gets, postsSeen, n/2)
	}
	if err := l.Err(); err != nil {
		t.Error(err)
	}
	// a small body is kept whole and not marked truncated
	rec := httptest.NewRecorder()
	l2 := NewRequestLog(nil, true)
	l2.Wrap(h).ServeHTTP(rec, httptest.NewRequest("POST", "http://"+HostHostile+hostile.Sink("beacon", "beacon"), strings.NewReader(`{"email":"jane.doe@example.com"}`)))
	if es := l2.Entries(); rec.Code != 204 || len(es) != 1 || es[0].Body != `{"email":"jane.doe@example.com"}` || es[0].BodyTruncated || es[0].URL != "http://"+HostHostile+"/hostile/beacon/sink/beacon" {
		t.Errorf("small body: %d %+v", rec.Code, es)
	}
}
