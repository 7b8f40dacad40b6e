package rules

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pab-dev/pab/sites"
)

func TestDefaultRules(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files()) != 1 || s.Files()[0].Path != EmbeddedDefaultPath {
		t.Fatalf("Default files = %v", s.Files())
	}
	blocked := []string{
		"https://www.google-analytics.com/g/collect?v=2&tid=G-X",
		"https://region1.analytics.google.com/g/collect",
		"https://www.googletagmanager.com/gtm.js?id=GTM-X",
		"https://stats.g.doubleclick.net/j/collect",
		"https://doubleclick.net/",
		"https://www.facebook.com/tr?id=1&ev=PageView",
		"https://www.facebook.com/tr/",
		"https://connect.facebook.net/en_US/fbevents.js",
		"https://static.hotjar.com/c/hotjar-1.js",
		"https://api.segment.io/v1/t",
		// The Matomo beacon recorded in corpus/sites/lil-projects.warc.gz.
		"https://analytics.lil.tools/piwik.php?action_name=Projects%20%7C%20Library%20Innovation%20Lab&idsite=1&rec=1&r=708298",
		"https://example.org/stats/matomo.php?idsite=3",
		// Chromium's own traffic (seen through the proxy in headless runs).
		"https://update.googleapis.com/service/update2/json?cup2key=1",
		"https://accounts.google.com/ListAccounts?gpsia=1",
		"http://clients2.google.com/time/1/current?cup2key=7",
		"https://clients1.google.com/tbproxy/af/query",
		"https://optimizationguide-pa.googleapis.com/v1:GetModels",
		"https://content-autofill.googleapis.com/v1/pages/Chx",
		"https://safebrowsing.googleapis.com/v4/threatListUpdates:fetch",
		"https://redirector.gvt1.com/edgedl/chrome/dict/en-us-10-1.bdic",
		// Host case, a trailing dot and port 443 do not hide a host.
		"https://WWW.Google-Analytics.com.:443/collect",
	}
	for _, raw := range blocked {
		if !s.Blocked(mustURL(t, raw)) {
			t.Errorf("Blocked(%s) = false, want true", raw)
		}
	}
	notBlocked := []string{
		"http://books.toscrape.com/",
		"https://ajax.googleapis.com/ajax/libs/jquery/2.2.4/jquery.min.js",
		"https://analytics.lil.tools/piwik.js",
		"https://lil.law.harvard.edu/projects/",
		"https://www.facebook.com/profile.php?id=1",
		"https://www.facebook.com/tracks",
		"https://www.google.com/search?q=matomo.php",
		"https://fonts.gstatic.com/s/roboto/v30/x.woff2",
		"https://www.archive.org/index.php",
	}
	for _, raw := range notBlocked {
		if s.Blocked(mustURL(t, raw)) {
			t.Errorf("Blocked(%s) = true, want false", raw)
		}
	}
	latest := map[string]bool{
		"https://shop.test/cart":                         true,
		"https://shop.test/cart?x=1":                     true,
		"https://shop.test/cart/":                        true,
		"https://www.amazon.com/gp/cart/view.html?ref=x": true,
		"https://shop.test/checkout/shipping":            true,
		"https://shop.test/en/basket":                    true,
		"https://shop.test/products/1":                   false,
		"https://shop.test/":                             false,
		"https://cart.shop.test/products":                false,
	}
	for raw, want := range latest {
		if got := s.Latest(mustURL(t, raw)); got != want {
			t.Errorf("Latest(%s) = %v, want %v", raw, got, want)
		}
	}
	if s.Excluded(mustURL(t, "https://shop.test/cart")) {
		t.Error("default rules exclude something")
	}
	k := s.Key(Request{URL: mustURL(t, "https://shop.test/p?id=7&utm_source=news&utm_medium=mail&gclid=x&fbclid=y&_=1700000000000&_ga=2.1&msclkid=m")})
	if got := k.String(); got != "GET shop.test/p?id=7" {
		t.Errorf("default drop_params: key %q", got)
	}
}

func TestLocations(t *testing.T) {
	s := loadSites(t, map[string]string{
		"_default.yaml": "block: [\"*/px/**\"]\n",
		"amazon.yaml": `site: amazon
hosts: ["amazon.com", "*.amazon.com"]
block: ["fls-na.amazon.com", "www.amazon.com/1/batch/**", "tracker.example", "*/uedata"]
exclude: ["www.amazon.com/checkpoint/**"]
latest: ["*/gp/aw/c"]
`,
		"local.yaml": `hosts: ["localhost:8080", "localhost:9090"]
block: ["localhost:8080/ads/**", "localhost/beacon", "*:9090/only9090", "[::1]:8080/v6/**"]
`,
	})
	tests := []struct {
		fn   string
		url  string
		want bool
	}{
		{"block", "https://fls-na.amazon.com/1/batch/1/OE/", true},
		{"block", "https://FLS-NA.Amazon.com./x", true},
		{"block", "https://www.amazon.com/1/batch/1/OE/", true},
		{"block", "https://www.amazon.com/1/batch", true},
		{"block", "https://www.amazon.com/1/%62atch/x", true},
		{"block", "https://www.amazon.com/1/batchx", false},
		{"block", "https://www.amazon.com/2/batch/1", false},
		// A pattern that names its host applies wherever the file sits.
		{"block", "https://tracker.example/p.gif", true},
		// A pattern with a star host applies to the file's own hosts only.
		{"block", "https://www.amazon.com/uedata", true},
		{"block", "https://shop.test/uedata", false},
		// _default's star-host patterns apply to every host.
		{"block", "https://shop.test/px/1", true},
		{"block", "https://shop.test/px", true},
		// Ports: a pattern without a port matches any port, one with a port only that one.
		{"block", "http://localhost:8080/ads/x", true},
		{"block", "http://localhost:9090/ads/x", false},
		{"block", "http://localhost:9090/beacon", true},
		{"block", "http://localhost:8080/beacon", true},
		{"block", "http://localhost:9090/only9090", true},
		{"block", "http://localhost:8080/only9090", false},
		{"block", "http://[::1]:8080/v6/x", true},
		{"block", "http://[::1]:9090/v6/x", false},
		{"exclude", "https://www.amazon.com/checkpoint/captcha?x=1", true},
		{"exclude", "https://www.amazon.com/checkpoint", true},
		{"exclude", "https://www.amazon.com/checkpointx", false},
		{"exclude", "https://smile.amazon.com/checkpoint/x", false},
		{"latest", "https://www.amazon.com/gp/aw/c?ref_=x", true},
		{"latest", "https://shop.test/gp/aw/c", false},
		{"latest", "https://www.amazon.com/gp/aw/cart", false},
	}
	for _, tc := range tests {
		u := mustURL(t, tc.url)
		var got bool
		switch tc.fn {
		case "block":
			got = s.Blocked(u)
		case "exclude":
			got = s.Excluded(u)
		case "latest":
			got = s.Latest(u)
		}
		if got != tc.want {
			t.Errorf("%s(%s) = %v, want %v", tc.fn, tc.url, got, tc.want)
		}
	}
}

func TestZeroAndNilSet(t *testing.T) {
	u := mustURL(t, "https://www.google-analytics.com/collect?utm_source=x")
	var zero Set
	var nilSet *Set
	for _, s := range []*Set{&zero, nilSet} {
		if s.Blocked(u) || s.Excluded(u) || s.Latest(u) {
			t.Error("a set without rules matched a location")
		}
		if _, _, ok := s.XHRNotFound("x"); ok {
			t.Error("XHRNotFound ok without rules")
		}
		if got := s.Key(Request{URL: u}).String(); got != "GET www.google-analytics.com/collect?utm_source=x" {
			t.Errorf("key = %q", got)
		}
		if s.Endpoint(Request{URL: u}) != nil || len(s.Files()) != 0 {
			t.Error("rules in an empty set")
		}
	}
	if nilSet.Blocked(nil) || zero.Latest(nil) {
		t.Error("nil URL matched")
	}
}

func TestXHRNotFound(t *testing.T) {
	s := loadSites(t, map[string]string{
		"_default.yaml": "xhr_not_found: {content_type: text/plain, body: nope}\n",
		"amazon.yaml": `hosts: ["*.amazon.com"]
xhr_not_found:
  content_type: application/json
  body: "{}"
`,
		"zshop.yaml": `hosts: ["*.amazon.com"]
xhr_not_found: {content_type: application/json, body: "{\"z\":1}"}
`,
	})
	tests := []struct{ host, ct, body string }{
		{"www.amazon.com", "application/json", "{}"}, // amazon before zshop by name
		{"WWW.AMAZON.COM:443", "application/json", "{}"},
		{"example.org", "text/plain", "nope"},
	}
	for _, tc := range tests {
		ct, body, ok := s.XHRNotFound(tc.host)
		if !ok || ct != tc.ct || body != tc.body {
			t.Errorf("XHRNotFound(%s) = %q, %q, %v; want %q, %q", tc.host, ct, body, ok, tc.ct, tc.body)
		}
	}
	none := loadSites(t, map[string]string{})
	if _, _, ok := none.XHRNotFound("example.org"); ok {
		t.Error("XHRNotFound ok with no rule")
	}
}

func TestLayering(t *testing.T) {
	root := t.TempDir()
	sitesDir := filepath.Join(root, "sites")
	taskDir := filepath.Join(root, "tasks", "t1", "rules")
	writeFiles(t, sitesDir, map[string]string{
		"_default.yaml": "drop_params: [d]\n",
		"shop.yaml": `site: shop
hosts: [shop.test]
drop_params: [a]
xhr_not_found: {content_type: application/json, body: sites}
endpoints:
  - name: p
    match: "GET /p/{id}"
    key: "/sites/{id}"
`,
		"shop.auto.yaml": `hosts: [shop.test]
drop_params: [s_auto]
xhr_not_found: {content_type: application/json, body: sites-auto}
`,
	})
	writeFiles(t, taskDir, map[string]string{
		"shop.auto.yaml": `site: shop
hosts: [shop.test]
drop_params: [b]
xhr_not_found: {content_type: application/json, body: auto}
endpoints:
  - name: p
    match: "GET /p/{id}/**"
    key: "/auto/{id}"
`,
		"shop.yaml": `hosts: [shop2.test]
drop_params: [c]
xhr_not_found: {content_type: application/json, body: task}
endpoints:
  - name: p
    match: "GET /p/{id}"
    key: "/task/{id}"
`,
		"README.md": "not a rule file\n",
	})

	s, err := Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	// Task hand-written wins single values.
	if _, body, _ := s.XHRNotFound("shop.test"); body != "task" {
		t.Errorf("xhr_not_found from %q, want the task's hand-written file", body)
	}
	// Lists combined from every layer, hosts included.
	for _, host := range []string{"shop.test", "shop2.test"} {
		k := s.Key(Request{URL: mustURL(t, "https://"+host+"/q?a=1&b=2&c=3&d=4&s_auto=5&e=6")})
		if got := k.String(); got != "GET "+host+"/q?e=6" {
			t.Errorf("combined drop_params: %q", got)
		}
	}
	// The winning file's endpoints first: task hand-written, then sites hand-written, then
	// inferred (task before sites).
	if got := s.Key(Request{URL: mustURL(t, "https://shop.test/p/1")}).String(); got != "GET shop.test/task/1" {
		t.Errorf("endpoint order: %q", got)
	}
	if got := s.Key(Request{URL: mustURL(t, "https://shop.test/p/1/x")}).String(); got != "GET shop.test/auto/1" {
		t.Errorf("inferred endpoint: %q", got)
	}
	var paths []string
	for _, f := range s.Files() {
		paths = append(paths, strings.TrimPrefix(f.Path, root+"/"))
	}
	if got := strings.Join(paths, " "); got != "sites/_default.yaml sites/shop.auto.yaml sites/shop.yaml tasks/t1/rules/shop.auto.yaml tasks/t1/rules/shop.yaml" {
		t.Errorf("Files = %s", got)
	}

	// Without the task's hand-written file, hand-written sites/ beats the task's inferred
	// file, and the task's inferred file beats sites/' inferred one.
	if err := os.Remove(filepath.Join(taskDir, "shop.yaml")); err != nil {
		t.Fatal(err)
	}
	s, err = Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, body, _ := s.XHRNotFound("shop.test"); body != "sites" {
		t.Errorf("xhr_not_found from %q, want sites' hand-written file", body)
	}
	if got := s.Key(Request{URL: mustURL(t, "https://shop.test/p/1")}).String(); got != "GET shop.test/sites/1" {
		t.Errorf("endpoint order: %q", got)
	}
	if err := os.Remove(filepath.Join(sitesDir, "shop.yaml")); err != nil {
		t.Fatal(err)
	}
	s, err = Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, body, _ := s.XHRNotFound("shop.test"); body != "auto" {
		t.Errorf("xhr_not_found from %q, want the task's inferred file", body)
	}
	// shop2.test came only from the removed file.
	if got := s.Key(Request{URL: mustURL(t, "https://shop2.test/q?b=2")}).String(); got != "GET shop2.test/q?b=2" {
		t.Errorf("shop2.test still has shop's rules: %q", got)
	}
}

func TestLoadDefaultReplacement(t *testing.T) {
	root := t.TempDir()
	sitesDir := filepath.Join(root, "sites")
	taskDir := filepath.Join(root, "rules")
	ga := mustURL(t, "https://www.google-analytics.com/collect")

	// Missing directories are fine; the embedded _default stands in.
	s, err := Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Blocked(ga) || s.Files()[0].Path != EmbeddedDefaultPath {
		t.Error("embedded default not used when sites/ is missing")
	}
	// A task's _default.yaml adds to the embedded one.
	writeFiles(t, taskDir, map[string]string{"_default.yaml": "drop_params: [sid]\n"})
	s, err = Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Blocked(ga) {
		t.Error("embedded default lost")
	}
	if got := s.Key(Request{URL: mustURL(t, "https://e.com/?sid=1&utm_source=x&k=v")}).String(); got != "GET e.com/?k=v" {
		t.Errorf("key = %q", got)
	}
	// The repository's sites/_default.yaml replaces the embedded copy.
	writeFiles(t, sitesDir, map[string]string{"_default.yaml": "# nothing\n"})
	s, err = Load(sitesDir, taskDir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocked(ga) {
		t.Error("embedded default used although sites/_default.yaml exists")
	}
	if got := s.Key(Request{URL: mustURL(t, "https://e.com/?sid=1&utm_source=x")}).String(); got != "GET e.com/?utm_source=x" {
		t.Errorf("key = %q", got)
	}
}

// TestShippedDefaultMatchesEmbedded checks that the embedded copy is the file in the repo.
func TestShippedDefaultMatchesEmbedded(t *testing.T) {
	data, err := os.ReadFile("../sites/_default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(sites.Default) {
		t.Error("sites.Default differs from sites/_default.yaml")
	}
	if _, err := Load("../sites"); err != nil {
		t.Errorf("load the shipped sites/: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // substring of the error
	}{
		{"no hosts", map[string]string{"shop.yaml": "drop_params: [a]\n"}, `shop.yaml: site "shop" has no hosts`},
		{"site name differs", map[string]string{"shop.yaml": "site: other\nhosts: [a.test]\n"}, `shop.yaml: field site is "other" but the file name says "shop"`},
		{"yml extension", map[string]string{"shop.yml": "hosts: [a.test]\n"}, "shop.yml: rule files end in .yaml"},
		{"hosts in _default", map[string]string{"_default.yaml": "hosts: [a.test]\n"}, "_default.yaml: field hosts: _default applies to every host"},
		{"bad file inside", map[string]string{"shop.yaml": "hosts: [a.test]\nblock: [\"a.test/[x\"]\n"}, `shop.yaml:2: field block: "a.test/[x": bad glob`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error has several lines: %q", err)
			}
		})
	}
}

func TestLoadFileSystem(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"evil.yaml": "hosts: [a.test]\n"})

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"_default.yaml": "", "real.yaml": "hosts: [real.test]\ndrop_params: [x]\n"})
	// A symlink inside the directory is followed.
	if err := os.Symlink("real.yaml", filepath.Join(dir, "alias.yaml")); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatalf("symlink inside the directory: %v", err)
	}
	if got := s.Key(Request{URL: mustURL(t, "https://real.test/?x=1")}).String(); got != "GET real.test/" {
		t.Errorf("key = %q", got)
	}

	// A symlink leading out of it is refused.
	if err := os.Symlink(filepath.Join(outside, "evil.yaml"), filepath.Join(dir, "evil.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "evil.yaml") {
		t.Errorf("symlink out of the directory: err = %v", err)
	}
	os.Remove(filepath.Join(dir, "evil.yaml"))
	if err := os.Symlink("../"+filepath.Base(outside)+"/evil.yaml", filepath.Join(dir, "evil.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("relative symlink out of the directory was followed")
	}
	os.Remove(filepath.Join(dir, "evil.yaml"))

	// Not a regular file.
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory named .yaml: err = %v", err)
	}
	os.Remove(filepath.Join(dir, "sub.yaml"))

	// Too large.
	big := "hosts: [a.test]\n" + strings.Repeat("# padding\n", MaxFileSize/10+1)
	writeFiles(t, dir, map[string]string{"big.yaml": big})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("large file: err = %v", err)
	}
	os.Remove(filepath.Join(dir, "big.yaml"))

	// The directory itself is a file.
	if _, err := Load(filepath.Join(dir, "real.yaml")); err == nil {
		t.Error("a file given as the directory was accepted")
	}
	// Hidden files are ignored.
	writeFiles(t, dir, map[string]string{".swp.yaml": "garbage: ["})
	if _, err := Load(dir); err != nil {
		t.Errorf("hidden file read: %v", err)
	}
}

// TestConcurrentUse runs lookups from several goroutines (meaningful under -race).
func TestConcurrentUse(t *testing.T) {
	s := loadSites(t, map[string]string{
		"_default.yaml": string(sites.Default),
		"shop.yaml":     "hosts: [shop.test]\nendpoints:\n  - name: p\n    match: /p/{id}/**\n    key: /p/{id}\n    body_keep: [a]\n",
	})
	want := s.Key(Request{Method: "POST", URL: mustURL(t, "https://shop.test/p/1/x?utm_source=y"), ContentType: "application/json", Body: []byte(`{"a":1,"b":2}`)}).String()
	if want != `POST shop.test/p/1 #body:{"a":1}` {
		t.Fatalf("key = %q", want)
	}
	done := make(chan string)
	u := mustURL(t, "https://shop.test/p/1/x?utm_source=y")
	for i := 0; i < 8; i++ {
		go func() {
			var got string
			for j := 0; j < 200; j++ {
				got = s.Key(Request{Method: "POST", URL: u, ContentType: "application/json", Body: []byte(`{"b":2,"a":1}`)}).String()
				s.Blocked(u)
				s.Latest(u)
				s.XHRNotFound(u.Host)
			}
			done <- got
		}()
	}
	for i := 0; i < 8; i++ {
		if got := <-done; got != want {
			t.Errorf("goroutine key %q, want %q", got, want)
		}
	}
}

// TestSiteApplies: site names resolve to the site's hosts (manifest not_found keys, issue 21).
func TestSiteApplies(t *testing.T) {
	s := loadSites(t, map[string]string{
		"books.yaml":  `hosts: ["books.toscrape.com", "bücher.example"]` + "\n",
		"amazon.yaml": `hosts: ["*.amazon.com"]` + "\n",
	})
	if got := s.SiteNames(); !slices.Equal(got, []string{"amazon", "books"}) {
		t.Errorf("SiteNames = %q", got)
	}
	for _, tc := range []struct {
		name, host string
		want       bool
	}{
		{"books", "books.toscrape.com", true},
		{"books", "BOOKS.toscrape.com:80", true},
		{"books", "xn--bcher-kva.example", true},
		{"books", "www.amazon.com", false},
		{"amazon", "www.amazon.com", true},
		{"_default", "books.toscrape.com", false},
		{"nosuch", "books.toscrape.com", false},
	} {
		if got := s.SiteApplies(tc.name, tc.host); got != tc.want {
			t.Errorf("SiteApplies(%q, %q) = %v, want %v", tc.name, tc.host, got, tc.want)
		}
	}
	if got := HostKey("Bücher.Example.:443"); got != "xn--bcher-kva.example" {
		t.Errorf("HostKey = %q", got)
	}
	var nilSet *Set
	if nilSet.SiteApplies("books", "books.toscrape.com") || nilSet.SiteNames() != nil {
		t.Error("nil set has sites")
	}
}
