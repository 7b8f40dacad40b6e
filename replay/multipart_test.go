package replay

import "testing"

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
