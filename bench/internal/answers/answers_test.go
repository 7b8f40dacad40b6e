package answers

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCycle writes a cycle file with the given lines and body files into a new directory.
func writeCycle(t testing.TB, lines string, bodies map[string]string) string {
	dir := t.TempDir()
	for name, b := range bodies {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "cycle.tsv")
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAndServe(t *testing.T) {
	p := writeCycle(t, "https://a.test/x.js?v=1\t200\tapplication/javascript\tfiles/x.js\t-\t5\n"+
		"http://b.test:8080/\t404\ttext/html\tfiles/b.html\t-\t3\n",
		map[string]string{"files/x.js": "hello", "files/b.html": "<p>"})
	m := Map{}
	hosts, err := Load(p, m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(hosts, ",") != "a.test,b.test" || len(m) != 2 {
		t.Fatalf("hosts %v, %d answers", hosts, len(m))
	}
	for _, c := range []struct {
		method, url string
		status      int
		body, ctype string
	}{
		{"GET", "https://a.test/x.js?v=1", 200, "hello", "application/javascript"},
		{"GET", "http://a.test:443/x.js?v=1", 200, "hello", "application/javascript"}, // a port is not part of the key
		{"HEAD", "https://a.test/x.js?v=1", 200, "", "application/javascript"},
		{"GET", "http://b.test/", 404, "<p>", "text/html"},
		{"GET", "https://a.test/x.js", 404, "not recorded\n", "text/plain; charset=utf-8"},
	} {
		rec := httptest.NewRecorder()
		Handler(m).ServeHTTP(rec, httptest.NewRequest(c.method, c.url, nil))
		if rec.Code != c.status || rec.Body.String() != c.body || rec.Header().Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", c.method, c.url, rec.Code, rec.Body.String(),
				rec.Header().Get("Content-Type"), c.status, c.body, c.ctype)
		}
		if c.status == 200 && (rec.Header().Get("Content-Length") != "5" || rec.Header().Get("Cache-Control") != "max-age=3600") {
			t.Errorf("%s %s: header %v", c.method, c.url, rec.Header())
		}
	}
}

func TestLoadErrors(t *testing.T) {
	bodies := map[string]string{"b": "abc"}
	for _, c := range []struct{ lines, want string }{
		{"https://a.test/\t200\ttext/html\tb\n", "line 1: want 6 tab-separated fields"},
		{"https://a.test/\t200\ttext/html\tb\t-\t3\nhttps://a.test/2\tok\ttext/html\tb\t-\t3\n", `line 2: status "ok"`},
		{"https://a.test/\t0\ttext/html\tb\t-\t3\n", `line 1: status "0", want a final status`},
		{"https://a.test/\t101\ttext/html\tb\t-\t3\n", `line 1: status "101", want a final status`},
		{"https://a.test/\t200\ttext/html\tmissing\t-\t3\n", "line 1: open"},
		{"https://a.test/\t200\ttext/html\tb\t-\t4\n", "line 1: b has 3 bytes, the line says 4"},
		{"%zz\t200\ttext/html\tb\t-\t3\n", "line 1: parse"},
		{"https://a.test/\t200\ttext/html\t../b\t-\t3\n", `line 1: body file "../b" is not a path inside`},
		{"https://a.test/\t200\ttext/html\t/etc/hostname\t-\t3\n", `line 1: body file "/etc/hostname" is not a path inside`},
	} {
		p := writeCycle(t, c.lines, bodies)
		_, err := Load(p, Map{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: error %v, want one naming %s and %q", c.lines, err, p, c.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.tsv"), Map{}); err == nil {
		t.Error("a missing cycle file: no error")
	}
}

// FuzzLoad: any cycle file is loaded or refused with an error, never a panic, and every
// answer loaded has the body its line's size names.
func FuzzLoad(f *testing.F) {
	f.Add("https://a.test/x\t200\ttext/plain\tb\t-\t3\n")
	f.Add("http://[::1]:80/\t0\t\tb\t\t3")
	f.Add("\t\t\t\t\t\n")
	f.Fuzz(func(t *testing.T, lines string) {
		p := writeCycle(t, lines, map[string]string{"b": "abc"})
		m := Map{}
		if _, err := Load(p, m); err != nil {
			return
		}
		for k, a := range m {
			if a.CLen[0] != "3" || string(a.Body) != "abc" {
				t.Fatalf("%s: %v %q", k, a.CLen, a.Body)
			}
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "http://x.test/", nil)
			r.Host, r.URL.Path, r.URL.RawQuery = "", "/", ""
			Handler(m).ServeHTTP(rec, r)
		}
	})
}
