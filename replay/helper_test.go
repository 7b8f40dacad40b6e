package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// ex is one exchange of a test bundle.
type ex struct {
	method  string
	url     string
	reqType string // request Content-Type
	reqBody []byte
	status  int
	header  []string // "Name: value" lines of the recorded response
	body    []byte
	resType string // RR-Resource-Type
	// unresolved marks a revisit whose original is not in the recording.
	unresolved bool
}

// writeTestBundle writes a bundle directory (docs/bundle-format.md) holding exs in order:
// archive/data.warc with one WARC 1.1 response record per exchange (a revisit record for an
// unresolved one), indexes/entries.jsonl, pages/pages.jsonl (every document exchange) and
// manifest.json. It is written by hand, independent of the warc package's writer, so that
// these tests pin the bundle format itself.
func writeTestBundle(t testing.TB, dir string, m recording.Manifest, exs []ex) *recording.Bundle {
	t.Helper()
	for _, d := range []string{"archive", "indexes", "pages"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var data, entries, pages bytes.Buffer
	base := time.Date(2026, 10, 22, 10, 40, 0, 0, time.UTC)
	for i, x := range exs {
		ts := base.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z")
		var block bytes.Buffer
		fmt.Fprintf(&block, "HTTP/1.1 %d %s\r\n", x.status, http.StatusText(x.status))
		for _, h := range x.header {
			block.WriteString(h + "\r\n")
		}
		block.WriteString("\r\n")
		typ := "response"
		if x.unresolved {
			typ = "revisit"
		} else {
			block.Write(x.body)
		}
		off := int64(data.Len())
		fmt.Fprintf(&data, "WARC/1.1\r\nWARC-Type: %s\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-%012d>\r\n"+
			"WARC-Date: %s\r\nWARC-Target-URI: %s\r\nContent-Type: application/http;msgtype=response\r\n"+
			"Content-Length: %d\r\n\r\n", typ, i+1, ts, x.url, block.Len())
		data.Write(block.Bytes())
		data.WriteString("\r\n\r\n")
		sum := sha256.Sum256(x.body)
		e := recording.Entry{
			ID: fmt.Sprintf("e%06d", i+1), TS: ts, Method: x.method, URL: x.url, Status: x.status,
			Digest: hex.EncodeToString(sum[:]), Size: int64(len(x.body)),
			RespOffset: off, RespLength: int64(data.Len()) - off,
			ReqType: x.reqType, ResourceType: x.resType, Unresolved: x.unresolved,
		}
		if x.unresolved {
			e.Size = 0
		}
		for _, h := range x.header {
			if n, v, _ := strings.Cut(h, ":"); strings.EqualFold(n, "Content-Type") {
				e.Mime = strings.TrimSpace(strings.Split(v, ";")[0])
			}
		}
		if len(x.reqBody) > 0 {
			e.ReqBody = base64.StdEncoding.EncodeToString(x.reqBody)
		}
		line, _ := json.Marshal(e)
		entries.Write(append(line, '\n'))
		if x.resType == "document" && x.method == "GET" {
			pl, _ := json.Marshal(recording.Page{URL: x.url, TS: ts, Fetched: "GET"})
			pages.Write(append(pl, '\n'))
		}
	}
	if m.CapturedFrom == "" {
		m.CapturedFrom = base.Format("2006-01-02T15:04:05.000Z")
		m.CapturedTo = base.Add(time.Duration(len(exs)) * time.Second).Format("2006-01-02T15:04:05.000Z")
	}
	mj, _ := json.Marshal(m)
	for name, content := range map[string][]byte{
		recording.WARCFile: data.Bytes(), recording.EntriesFile: entries.Bytes(), recording.PagesFile: pages.Bytes(), recording.ManifestFile: mj,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := recording.OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// testRules loads rules from a temporary directory holding the given files
// (name → YAML), replacing the embedded _default.yaml when "_default.yaml" is given.
func testRules(t testing.TB, files map[string]string) *rules.Set {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := rules.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// defaultTestRules are the rules of most tests: tracking parameters dropped, one tracker
// host blocked, carts answered with their last copy, and an xhr_not_found for site.test.
var defaultTestRules = map[string]string{
	"_default.yaml": `
drop_params: ["utm_*", fbclid]
block: ["tracker.test", "site.test/beacon/**"]
exclude: ["site.test/captcha/**"]
latest: ["*/cart*"]
`,
	"site.yaml": `
hosts: ["site.test"]
xhr_not_found: { content_type: application/json, body: '{"error":"not recorded"}' }
`,
}

// bigPayload is a deterministic binary payload of n bytes.
func bigPayload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// siteExchanges is the recording most tests replay.
func siteExchanges() []ex {
	return []ex{
		/* e000001 */ {method: "GET", url: "https://site.test/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html; charset=utf-8", "X-Custom: kept",
				"Transfer-Encoding: chunked", "Connection: keep-alive, X-Hop", "X-Hop: dropped", "Keep-Alive: timeout=5",
				"Alt-Svc: h3=\":443\"", "Content-Length: 99999", "Set-Cookie: a=1", "Set-Cookie: b=2"},
			body: []byte("<!doctype html><title>Home</title><h1>home</h1>")},
		/* e000002 */ {method: "GET", url: "https://site.test/style.css", status: 200, resType: "style",
			header: []string{"Content-Type: text/css"}, body: []byte("h1{color:red}")},
		/* e000003 */ {method: "GET", url: "https://site.test/img.png", status: 200, resType: "image",
			header: []string{"Content-Type: image/png"}, body: bigPayload(300 << 10)},
		/* e000004 */ {method: "GET", url: "https://site.test/search?q=shoes&page=1", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("shoes page 1")},
		/* e000005 */ {method: "GET", url: "https://site.test/search?q=boots&page=2", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("boots page 2")},
		/* e000006 */ {method: "POST", url: "https://site.test/api/cart", reqType: "application/json",
			reqBody: []byte(`{"id":1,"qty":2}`), status: 200, resType: "fetch",
			header: []string{"Content-Type: application/json"}, body: []byte(`{"ok":true}`)},
		/* e000007 */ {method: "GET", url: "https://site.test/cart", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("first cart")},
		/* e000008 */ {method: "GET", url: "https://site.test/cart", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("last cart")},
		/* e000009 */ {method: "GET", url: "https://site.test:8443/port", status: 200, resType: "document",
			header: []string{"Content-Type: text/plain"}, body: []byte("port 8443")},
		/* e000010 */ {method: "GET", url: "http://plain.test/", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("plain http home")},
		/* e000011 */ {method: "GET", url: "https://site.test/no-such-page-probe", status: 404, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("<title>Site 404</title>the site's own 404")},
		/* e000012 */ {method: "GET", url: "https://site.test/empty", status: 204, resType: "fetch",
			header: []string{"X-Empty: yes"}},
		/* e000013 */ {method: "GET", url: "https://site.test/gone", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, unresolved: true},
		/* e000014 */ {method: "GET", url: "https://site.test/dup", status: 200, resType: "document",
			header: []string{"Content-Type: text/plain"}, body: []byte("first copy")},
		/* e000015 */ {method: "GET", url: "https://site.test/dup", status: 200, resType: "document",
			header: []string{"Content-Type: text/plain"}, body: []byte("second copy")},
		/* e000016 */ {method: "GET", url: "https://site.test/captcha/check", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("captcha")},
		/* e000017 */ {method: "GET", url: "https://site.test/notmod", status: 304, resType: "script",
			header: []string{"ETag: \"x\""}},
		/* e000018 */ {method: "GET", url: "https://site.test/page?utm_source=mail&id=7", status: 200, resType: "document",
			header: []string{"Content-Type: text/html"}, body: []byte("page 7")},
	}
}

// siteManifest names the site's own 404 page.
func siteManifest() recording.Manifest {
	return recording.Manifest{TaskID: "test", NotFound: map[string]string{"site.test": "https://site.test/no-such-page-probe"}}
}
