package replay

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// TestProxyMultipartOldAndNewRecordings: a recorded upload form is answered over HTTPS
// when posted again with a fresh boundary, whether its entry keeps the boundary
// ("multipart/form-data; boundary=...", as recordings are written now) or only the media
// type (as recordings were written before: the boundary is then read from the recorded
// body at open). A body whose first line is no delimiter stays keyed by its digest.
func TestProxyMultipartOldAndNewRecordings(t *testing.T) {
	const recorded = "----WebKitFormBoundaryQ3v1Ie0zZ5cYk9Lx"
	form := func(boundary, file string) []byte {
		return []byte("--" + boundary + "\r\n" +
			"Content-Disposition: form-data; name=\"title\"\r\n\r\nmy cat\r\n" +
			"--" + boundary + "\r\n" +
			"Content-Disposition: form-data; name=\"photo\"; filename=\"cat.png\"\r\nContent-Type: image/png\r\n\r\n" + file + "\r\n" +
			"--" + boundary + "--\r\n")
	}
	for _, reqType := range []string{"multipart/form-data; boundary=" + recorded, "multipart/form-data"} {
		t.Run(reqType, func(t *testing.T) {
			exs := append(siteExchanges(),
				ex{method: "POST", url: "https://site.test/photos", reqType: reqType, reqBody: form(recorded, "\x89PNG pixels"),
					status: 201, resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"id":7}`)},
				ex{method: "POST", url: "https://site.test/raw", reqType: reqType, reqBody: []byte("not a form"),
					status: 201, resType: "fetch", header: []string{"Content-Type: application/json"}, body: []byte(`{"id":8}`)})
			tp := startProxy(t, siteManifest(), exs, defaultTestRules)
			for _, c := range []struct {
				url, boundary, file string
				body                []byte
				status              int
			}{
				{url: "https://site.test/photos", boundary: recorded, file: "\x89PNG pixels", status: 201},
				{url: "https://site.test/photos", boundary: "fresh9f8e7d6c5b4a", file: "\x89PNG pixels", status: 201},
				{url: "https://site.test/photos", boundary: "fresh9f8e7d6c5b4a", file: "\x89PNG other", status: 404},
				{url: "https://site.test/raw", boundary: recorded, body: []byte("not a form"), status: 201},
			} {
				body := c.body
				if body == nil {
					body = form(c.boundary, c.file)
				}
				got := tp.do(t, "POST", c.url, map[string]string{"Content-Type": "multipart/form-data; boundary=" + c.boundary}, body)
				if got.status != c.status {
					t.Errorf("%s boundary %s file %q: %d %q, want %d", c.url, c.boundary, c.file, got.status, got.body, c.status)
				}
			}
		})
	}
}

// TestShippedMultipartFreshBoundary: every upload form recorded in the shipped tasks (the
// five of apply-adversarial, recorded before the boundary was kept) is found exact when a
// browser posts it again: the same parts under a fresh boundary.
func TestShippedMultipartFreshBoundary(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("..", "tasks", "*", "recording"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("no shipped task recordings (%v)", err)
	}
	forms := 0
	for _, rec := range recs {
		dir := filepath.Dir(rec)
		rs, err := rules.Load(filepath.Join("..", "sites"), filepath.Join(dir, "rules"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := recording.OpenBundle(rec)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ix, err := NewIndex(b, rs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Entries {
			e := &b.Entries[i]
			if !strings.HasPrefix(e.ReqType, "multipart/form-data") {
				continue
			}
			forms++
			body, err := b.RequestBody(e)
			if err != nil {
				t.Fatal(err)
			}
			_, params, err := mime.ParseMediaType(e.RequestType(body))
			if err != nil || params["boundary"] == "" {
				t.Fatalf("%s %s: no boundary in %q (%v)", filepath.Base(dir), e.ID, e.RequestType(body), err)
			}
			// the same parts, headers and bytes, under a boundary the browser picks afresh
			var again bytes.Buffer
			mw := multipart.NewWriter(&again)
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for {
				p, err := mr.NextRawPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s %s: %v", filepath.Base(dir), e.ID, err)
				}
				w, _ := mw.CreatePart(p.Header)
				io.Copy(w, p)
			}
			mw.Close()
			u, _ := url.Parse(e.URL)
			res := ix.Lookup(rules.Request{Method: e.Method, URL: u, Body: again.Bytes(), ContentType: mw.FormDataContentType()})
			if res.Source != SourceExact || res.Entry == nil || res.Entry.ID != e.ID {
				t.Errorf("%s %s %s: %s %v, want exact", filepath.Base(dir), e.ID, e.URL, res.Source, res.Entry)
			}
		}
	}
	if forms < 5 {
		t.Errorf("%d recorded upload forms, want apply-adversarial's 5 at least", forms)
	}
}
