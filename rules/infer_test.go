package rules

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 10, 22, 10, 40, 57, 0, time.UTC)

// smp builds a sample: a GET with a 200 response unless changed by the options.
func smp(rawURL, ct, body string, opts ...func(*Sample)) Sample {
	s := Sample{Method: "GET", URL: rawURL, Status: 200, ContentType: ct, Body: []byte(body), Time: t0}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func status(n int) func(*Sample) { return func(s *Sample) { s.Status = n } }
func post(ct, body string) func(*Sample) {
	return func(s *Sample) { s.Method, s.ReqContentType, s.ReqBody = "POST", ct, []byte(body) }
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// page returns an HTML page of n words with an optional canonical link.
func page(title string, words int, canonical string) string {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>" + title + "</title>")
	if canonical != "" {
		b.WriteString(`<link rel="canonical" href="` + canonical + `">`)
	}
	b.WriteString("</head><body><p>")
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("word")
	}
	b.WriteString("</p></body></html>")
	return b.String()
}

// inferOne runs Infer and returns the file of site (nil when none) after checking that
// every file parses and loads as a Set.
func inferOne(t *testing.T, samples []Sample, base *Set, site string) *InferredFile {
	t.Helper()
	files := Infer(samples, base, InferOptions{})
	var got *InferredFile
	for _, f := range files {
		if _, err := ParseFile(AutoFileName(f.Site), f.YAML); err != nil {
			t.Fatalf("%s does not parse: %v\n%s", f.Site, err, f.YAML)
		}
		if f.Site == site {
			got = f
		}
	}
	return got
}

// setOf loads an inferred file alone as a Set.
func setOf(t *testing.T, f *InferredFile) *Set {
	t.Helper()
	s, err := build([]layerFile{{file: f.File, site: f.Site, auto: true}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func defaultSet(t *testing.T) *Set {
	t.Helper()
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type inferCase struct {
	name    string
	samples []Sample
	base    bool // use the built-in _default rules
	site    string
	want    []string // lines or fragments the YAML must hold
	absent  []string // fragments it must not hold ("" site file absent entirely when want is empty)
}

func runInferCases(t *testing.T, cases []inferCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var base *Set
			if c.base {
				base = defaultSet(t)
			}
			f := inferOne(t, c.samples, base, c.site)
			if len(c.want) == 0 {
				if f != nil && len(c.absent) == 0 {
					t.Fatalf("want no rules for %s, got\n%s", c.site, f.YAML)
				}
			} else if f == nil {
				t.Fatalf("no rules inferred for %s", c.site)
			}
			if f == nil {
				return
			}
			y := string(f.YAML)
			for _, w := range c.want {
				if !strings.Contains(y, w) {
					t.Errorf("want %q in\n%s", w, y)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(y, a) {
					t.Errorf("want no %q in\n%s", a, y)
				}
			}
		})
	}
}

func TestInferBotChecks(t *testing.T) {
	cf, rc := readTestdata(t, "cf-interstitial.html"), readTestdata(t, "recaptcha.html")
	article := page("News", 400, "") // long page
	runInferCases(t, []inferCase{
		{name: "cloudflare interstitial", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/p/1", "text/html", cf, status(403))},
			want:    []string{`- "www.shop.test/p/1" # bot-check text "just a moment": https://www.shop.test/p/1`}},
		{name: "recaptcha wall", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/signin", "text/html; charset=utf-8", rc)},
			want:    []string{`- "www.shop.test/signin" # captcha element .g-recaptcha on a page of 2 words`}},
		{name: "challenge path", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/checkpoint/verify?x=1", "text/html", page("Hi", 5, "")),
				smp("https://www.shop.test/checkpoint/static/app.js", "text/javascript", "var a"),
			},
			want: []string{`- "www.shop.test/checkpoint/**" # bot-check path segment "checkpoint"`}},
		{name: "amazon text", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/errors/validate", "text/html",
				`<html><body><h4>Enter the characters you see below</h4><p>Sorry, we just need to make sure you&#39;re not a robot.</p><form><input type="text" name="field-keywords"></form></body></html>`)},
			want: []string{`"www.shop.test/errors/validate" # bot-check text "enter the characters you see below"`}},
		{name: "a contest is not a challenge", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/challenge/2024", "text/html", page("Coding challenge", 20, ""))}},
		{name: "captcha path prefix", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/captchaPage/img.png", "image/png", "png")},
			want:    []string{`- "www.shop.test/captchaPage/**" # bot-check path segment "captchaPage"`}},
		{name: "cf_chl parameter", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/a?__cf_chl_tk=abc", "text/html", page("x", 3, ""))},
			want:    []string{`"www.shop.test/a" # Cloudflare challenge parameter __cf_chl_tk`}},
		{name: "long article that mentions it", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/blog/bots", "text/html", strings.Replace(article, "<p>", "<p>We saw unusual traffic ", 1))}},
		{name: "login form with an invisible recaptcha", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/login", "text/html",
				`<html><body><form><input type="email" name="e"><input type="password" name="p"><div class="g-recaptcha"></div></form></body></html>`)}},
		{name: "a path also recorded as a real page", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/s?k=a", "text/html", cf),
				smp("https://www.shop.test/s?k=b", "text/html", page("Results", 50, "")),
			},
			absent: []string{"exclude"}},
		{name: "script text does not count", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/x", "text/html", `<html><body><script>var m="verify you are human"</script>hello</body></html>`)}},
	})
}

func TestInferTrackers(t *testing.T) {
	gif := "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
	home := smp("https://www.shop.test/", "text/html", page("Home", 20, ""))
	runInferCases(t, []inferCase{
		{name: "host of beacons blocked whole", site: "shop.test",
			samples: []Sample{
				home,
				smp("https://fls-na.shop.test/1/batch/1/OE/", "text/plain", "", status(204), post("text/plain", "x")),
				smp("https://fls-na.shop.test/1/uedata/9", "image/gif", gif),
			},
			want:   []string{`- "fls-na.shop.test" # host serves only beacons: 2 near-empty answers`},
			absent: []string{`"fls-na.shop.test/`}},
		{name: "beacon path under a site host", site: "shop.test",
			samples: []Sample{
				home,
				smp("https://www.shop.test/1/batch/1/OP/A1:131", "text/plain", "", status(204)),
				smp("https://www.shop.test/1/batch/2/OP/B2", "application/json", "{}"),
				smp("https://www.shop.test/px.gif?e=view", "image/gif", gif),
			},
			want: []string{`- "www.shop.test/1/batch/**" # beacon: 2 near-empty answers (status 204, 0 bytes)`,
				`- "www.shop.test/px.gif" # beacon: 1 near-empty answer (status 200, 43 bytes)`},
			absent: []string{`- "www.shop.test"`}},
		{name: "a word that only contains a beacon word", site: "shop.test",
			samples: []Sample{home, smp("https://www.shop.test/blog/catalog", "text/plain", "", status(204))}},
		{name: "a real page under the beacon word", site: "shop.test",
			samples: []Sample{home,
				smp("https://www.shop.test/events/ping", "text/plain", "", status(204)),
				smp("https://www.shop.test/events/calendar", "text/html", page("Events", 80, "")),
			}},
		{name: "robots.txt is small but not a beacon", site: "shop.test",
			samples: []Sample{smp("https://ia1.shop.test/robots.txt", "text/plain", "User-agent: *\nDisallow:\n")}},
		{name: "already blocked by _default", site: "lil.tools", base: true,
			samples: []Sample{smp("https://analytics.lil.tools/piwik.php?idsite=1", "text/html", "", status(204))}},
		{name: "not blocked without _default", site: "lil.tools",
			samples: []Sample{smp("https://analytics.lil.tools/piwik.php?idsite=1", "text/html", "", status(204))},
			want:    []string{`- "analytics.lil.tools" # host serves only beacons`}},
	})
}

func TestInferVolatile(t *testing.T) {
	big := strings.Repeat("same answer ", 10)
	ms := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixMilli(), 10) }
	runInferCases(t, []inferCase{
		{name: "random hex differs between loads", site: "shop.test",
			samples: []Sample{
				smp("https://api.shop.test/list?page=1&cb=9f86d081884c7d659a2feaa0c55ad015", "application/json", `{"a":1}`),
				smp("https://api.shop.test/list?page=1&cb=3e23e8160039594a33894f6564e1b134", "application/json", `{"a":2}`),
			},
			want:   []string{`- "cb" # GET api.shop.test/list: 2 loads, a new random-looking value each time`},
			absent: []string{`"page"`}},
		{name: "uuid and base64 tokens", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/a?rid=123e4567-e89b-12d3-a456-426614174000&tok=Zk3pQ9xLw2Rb7TmN4vYs8Hc", "text/html", page("A", 5, "")),
				smp("https://www.shop.test/a?rid=0b9e5d2c-4f1a-4c3e-9a7b-8d6f5e4c3b2a&tok=Ab4Kd9Pq2Wx7Zr5Ty8Mn3Vb", "text/html", page("A", 6, "")),
			},
			want: []string{`- "rid" # GET www.shop.test/a: 2 loads`, `- "tok" # GET www.shop.test/a: 2 loads`}},
		{name: "epoch milliseconds near the recording", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/api/x?_t="+ms(-3*time.Second)+"&id=7", "application/json", `{}`)},
			want:    []string{`- "_t" # GET www.shop.test/api/x: epoch time within a day of the recording`},
			absent:  []string{`"id"`}},
		{name: "epoch far from the recording", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/api/x?t="+ms(-72*time.Hour), "application/json", `{}`)}},
		{name: "other values leave the response unchanged", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/app.js?v=1.2", "text/javascript", big),
				smp("https://www.shop.test/app.js?v=1.3", "text/javascript", big),
			},
			want: []string{`- "v" # GET www.shop.test/app.js: other values left the response unchanged (1.2, 1.3)`}},
		{name: "a name that changes a response elsewhere", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/player.js?type=a", "text/javascript", big),
				smp("https://www.shop.test/player.js?type=b", "text/javascript", big),
				smp("https://www.shop.test/rss?type=a", "text/xml", big+"a"),
				smp("https://www.shop.test/rss?type=b", "text/xml", big+"b"),
			}},
		{name: "ids change the response", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/post?id=191024", "text/html", page("A", 30, "")),
				smp("https://www.shop.test/post?id=191031", "text/html", page("B", 40, "")),
			}},
		{name: "a random-looking value seen twice is an id", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/o?oid=9f86d081884c7d659a2feaa0c55ad015", "text/html", page("A", 30, "")),
				smp("https://www.shop.test/o?oid=9f86d081884c7d659a2feaa0c55ad015", "text/html", page("A", 31, "")),
				smp("https://www.shop.test/o?oid=3e23e8160039594a33894f6564e1b134", "text/html", page("B", 40, "")),
			}},
		{name: "slugs and words are not random", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/d?identifier=gd1978-12-16.sonyecm250-no-dolby.walker", "text/html", page("A", 30, "")),
				smp("https://www.shop.test/d?identifier=chemicallecturee00newtrich-and-more", "text/html", page("B", 40, "")),
			}},
		{name: "already dropped by _default", site: "shop.test", base: true,
			samples: []Sample{
				smp("https://www.shop.test/?utm_source=9f86d081884c7d659a2feaa0c55ad015", "text/html", page("A", 30, "")),
				smp("https://www.shop.test/?utm_source=3e23e8160039594a33894f6564e1b134", "text/html", page("A", 30, "")),
			}},
		{name: "form and JSON body tokens", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/cart/add", "application/json", `{"ok":true}`, post("application/x-www-form-urlencoded", "item=5&csrf=Zk3pQ9xLw2Rb7TmN4vYs8Hc1")),
				smp("https://www.shop.test/cart/add", "application/json", `{"ok":true}`, post("application/x-www-form-urlencoded", "item=5&csrf=Ab4Kd9Pq2Wx7Zr5Ty8Mn3Vb2")),
				smp("https://www.shop.test/api/q", "application/json", `{}`, post("application/json", `{"ctx":{"nonce":"9f86d081884c7d659a2feaa0c55ad015"},"n":1}`)),
				smp("https://www.shop.test/api/q", "application/json", `{}`, post("application/json", `{"ctx":{"nonce":"3e23e8160039594a33894f6564e1b134"},"n":1}`)),
			},
			want:   []string{"body_drop:\n  - \"csrf\" # POST www.shop.test/cart/add: 2 loads", `- "nonce" # POST www.shop.test/api/q: 2 loads`},
			absent: []string{`"item"`, `"n"`, "drop_params"}},
	})
}

func TestInferIdentity(t *testing.T) {
	canon := "https://www.shop.test/Apple-AirPods-Pro-3/dp/B0FQFB8FMG"
	amazon := []Sample{
		smp("https://www.shop.test/Apple-AirPods-Pro-3/dp/B0FQFB8FMG/ref=sr_1_1?th=1", "text/html", page("AirPods", 30, canon)),
		smp("https://www.shop.test/dp/B0FQFB8FMG?psc=1", "text/html", page("AirPods", 31, canon)),
		smp("https://www.shop.test/Other/dp/B0ABCDEF12", "text/html", page("Other", 31, "/Other/dp/B0ABCDEF12")),
	}
	runInferCases(t, []inferCase{
		{name: "amazon asin", site: "shop.test", samples: amazon,
			want: []string{`name: "page-dp"`, `match: "GET /**/dp/{id}/**"`, `host: "www.shop.test"`, `key: "/dp/{id}"`, `keep_params: []`,
				"# 3 recorded URLs of 2 pages name their canonical /dp/{id}"}},
		{name: "target code", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/p/apple-airpods/-/A-12345678", "text/html", page("T", 30, "https://www.shop.test/p/apple-airpods/-/A-12345678")),
				smp("https://www.shop.test/p/airpods-pro/-/A-12345678?preselect=9", "text/html", page("T", 30, "https://www.shop.test/p/apple-airpods/-/A-12345678")),
			},
			want: []string{`match: "GET /**/-/{id}"`, `key: "/-/{id}"`}},
		{name: "canonical keeps a parameter", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/item/12345/blue-shirt?ref=x&color=blue", "text/html", page("T", 30, "/item/12345?color=blue")),
				smp("https://www.shop.test/item/12345?color=blue&src=y", "text/html", page("T", 30, "/item/12345?color=blue")),
			},
			want: []string{`match: "GET /**/item/{id}/**"`, `keep_params: ["color"]`}},
		{name: "one URL is not enough", site: "shop.test", samples: amazon[:1]},
		{name: "a page that says otherwise", site: "shop.test",
			samples: append(slices.Clone(amazon), smp("https://www.shop.test/x/dp/B0ZZZZZZZ9/reviews", "text/html", page("R", 30, "/product-reviews/B0ZZZZZZZ9")))},
		{name: "slug only", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/blog/hello-world", "text/html", page("T", 30, "/blog/hello-world")),
				smp("https://www.shop.test/blog/hello-world?x=1", "text/html", page("T", 30, "/blog/hello-world")),
			}},
	})
	// The endpoint maps every recorded form of a page to one key.
	f := inferOne(t, amazon, nil, "shop.test")
	s := setOf(t, f)
	k1 := s.Key(Request{Method: "GET", URL: mustURL(t, amazon[0].URL)}).String()
	k2 := s.Key(Request{Method: "GET", URL: mustURL(t, amazon[1].URL)}).String()
	k3 := s.Key(Request{Method: "GET", URL: mustURL(t, "https://www.shop.test/dp/B0FQFB8FMG")}).String()
	if k1 != "GET www.shop.test/dp/B0FQFB8FMG" || k2 != k1 || k3 != k1 {
		t.Errorf("keys %q %q %q, want one key GET www.shop.test/dp/B0FQFB8FMG", k1, k2, k3)
	}
}

func TestInferSearches(t *testing.T) {
	res := page("Results", 40, "")
	runInferCases(t, []inferCase{
		{name: "html search", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/s?k=airpods+pro&ref=nb", "text/html", res),
				smp("https://www.shop.test/s?k=usb+c+cable", "text/html", res),
			},
			want: []string{"# 2 recorded searches in k, e.g. k=airpods pro", `name: "search-s"`, `match: "GET /s"`, `host: "www.shop.test"`, `kind: "search"`, `text_param: "k"`}},
		{name: "json suggestions by prefix", site: "shop.test",
			samples: []Sample{smp("https://completion.shop.test/api/2017/suggestions?prefix=air&limit=11", "application/json", `{"s":[]}`)},
			want:    []string{`match: "GET /api/2017/suggestions"`, `text_param: "prefix"`}},
		{name: "preferred name", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/find?term=a&q=shoes", "text/html", res)},
			want:    []string{`text_param: "q"`}},
		{name: "numbers are not text", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/stats?s=55", "text/html", res)}},
		{name: "prefix outside a suggestion path", site: "shop.test",
			samples: []Sample{smp("https://www.shop.test/list?prefix=abc", "application/json", `{}`)}},
		{name: "images and posts", site: "shop.test",
			samples: []Sample{
				smp("https://www.shop.test/img?q=cat", "image/png", "png"),
				smp("https://www.shop.test/s", "text/html", res, post("application/x-www-form-urlencoded", "q=cat")),
			}},
	})
}

func TestInferLayout(t *testing.T) {
	// Site names come from base when its hosts match, else from the registrable domain.
	base, err := build([]layerFile{
		{file: &File{Path: "amazon.yaml", Hosts: []string{"*.amazon.com"}}, site: "amazon"},
	})
	if err != nil {
		t.Fatal(err)
	}
	samples := []Sample{
		smp("https://www.amazon.com/s?k=a", "text/html", page("R", 10, "")),
		smp("https://shop.example.co.uk/search?q=a", "text/html", page("R", 10, "")),
		smp("http://127.0.0.1:8080/search?q=a", "text/html", page("R", 10, "")),
		smp("ftp://x.test/search?q=a", "text/html", page("R", 10, "")),
		smp("%%%", "text/html", ""),
	}
	files := Infer(samples, base, InferOptions{})
	var names []string
	for _, f := range files {
		names = append(names, f.Site+" "+strings.Join(f.Hosts, ","))
	}
	want := []string{"127.0.0.1 127.0.0.1", "amazon www.amazon.com", "example.co.uk shop.example.co.uk"}
	if !slices.Equal(names, want) {
		t.Errorf("sites %q, want %q", names, want)
	}
	// Deterministic: the same input gives the same bytes, whatever the order of sites.
	again := Infer(samples, base, InferOptions{})
	for i := range files {
		if !bytes.Equal(files[i].YAML, again[i].YAML) {
			t.Errorf("%s differs between runs", files[i].Site)
		}
	}
	if f := files[0]; !strings.Contains(string(f.YAML), `host: "127.0.0.1"`) {
		t.Errorf("127.0.0.1:\n%s", f.YAML)
	}
}

func TestWriteAutoFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rules")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hand := "hosts: [www.shop.test]\ndrop_params: [x]\n"
	for name, data := range map[string]string{"shop.test.yaml": hand, "old.test.auto.yaml": "hosts: [old.test]\n", "README.md": "notes"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := Infer([]Sample{
		smp("https://www.shop.test/s?k=a", "text/html", page("R", 10, "")),
		smp("https://t.other.test/collect", "text/plain", "", status(204)),
	}, nil, InferOptions{})
	if len(files) != 2 {
		t.Fatalf("got %d files", len(files))
	}
	if err := WriteAutoFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"README.md", "other.test.auto.yaml", "shop.test.auto.yaml", "shop.test.yaml"}; !slices.Equal(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shop.test.yaml")); string(b) != hand {
		t.Errorf("hand-written file changed: %q", b)
	}
	// The files load, layered under the hand-written one.
	set, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e := set.Endpoint(Request{Method: "GET", URL: mustURL(t, "https://www.shop.test/s?k=b")}); e == nil || e.Kind != KindSearch {
		t.Errorf("search endpoint not loaded: %+v", e)
	}
	if !set.Blocked(mustURL(t, "https://t.other.test/collect")) {
		t.Error("beacon host not blocked after loading")
	}
	// Bad input changes nothing.
	bad := []struct {
		name  string
		files []*InferredFile
		err   string
	}{
		{"traversal", []*InferredFile{{Site: "../x", YAML: []byte("hosts: [a]\n")}}, `bad site name "../x"`},
		{"default", []*InferredFile{{Site: "_default", YAML: nil}}, `bad site name "_default"`},
		{"twice", []*InferredFile{files[0], files[0]}, "given twice"},
		{"bad yaml", []*InferredFile{{Site: "z", YAML: []byte("hosts: [a\n")}}, "z.auto.yaml:"},
		{"site mismatch", []*InferredFile{{Site: "z", YAML: []byte("site: y\nhosts: [a]\n")}}, `field site is "y"`},
	}
	for _, b := range bad {
		err := WriteAutoFiles(dir, b.files)
		if err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("%s: error %v, want %q", b.name, err, b.err)
		}
	}
	if after, _ := os.ReadDir(dir); len(after) != len(ents) {
		t.Errorf("a refused write changed the directory: %d files, had %d", len(after), len(ents))
	}
	// No files: every .auto.yaml goes, hand-written ones stay.
	if err := WriteAutoFiles(dir, nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(dir)
	names = names[:0]
	for _, e := range after {
		names = append(names, e.Name())
	}
	if want := []string{"README.md", "shop.test.yaml"}; !slices.Equal(names, want) {
		t.Errorf("after an empty write: %q, want %q", names, want)
	}
}

func TestInferEndpointNamesUnique(t *testing.T) {
	res := page("Results", 10, "")
	f := inferOne(t, []Sample{
		smp("https://a.shop.test/s?q=x", "text/html", res),
		smp("https://b.shop.test/s?q=x", "text/html", res),
		smp("https://c.shop.test/s-2?q=x", "text/html", res),
	}, nil, "shop.test")
	if f == nil || len(f.File.Endpoints) != 3 {
		t.Fatalf("want 3 endpoints, got %v", f)
	}
	var names []string
	for _, e := range f.File.Endpoints {
		names = append(names, e.Name+" "+e.Host)
	}
	if want := []string{"search-s a.shop.test", "search-s-2 b.shop.test", "search-s-2-2 c.shop.test"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
}

func TestLooksRandom(t *testing.T) {
	for v, want := range map[string]bool{
		"9f86d081884c7d659a2feaa0c55ad015":     true,
		"123e4567-e89b-12d3-a456-426614174000": true,
		"Zk3pQ9xLw2Rb7TmN4vYs8Hc":              true,
		"deadbeefdeadbeef":                     false, // no digit
		"1234567890123456":                     false, // digits only
		"gd1978-12-16.sonyecm250-no-dolby":     false,
		"airpods-pro-3-wireless-earbuds":       false,
		"B0FQFB8FMG":                           false, // short
		"HelloWorldFooBar2024":                 false, // words
	} {
		if got := looksRandom(v); got != want {
			t.Errorf("looksRandom(%q) = %v, want %v", v, got, want)
		}
	}
}

func FuzzInfer(f *testing.F) {
	cf := readTestdata(f, "cf-interstitial.html")
	f.Add("https://www.shop.test/p/1?cb=9f86d081884c7d659a2feaa0c55ad015", "https://www.shop.test/p/1?cb=3e23e8160039594a33894f6564e1b134", "text/html", []byte(cf), 200, []byte(`{"a":{"b":"c"}}`))
	f.Add("https://www.shop.test/x/dp/B0FQFB8FMG/ref=1", "https://www.shop.test/dp/B0FQFB8FMG", "text/html", []byte(page("A", 3, "/x/dp/B0FQFB8FMG")), 200, []byte("a=1&b=2"))
	f.Add("https://t.test/collect?x=1", "https://t.test/batch", "image/gif", []byte("GIF89a\x01\x00\x01\x00"), 204, []byte(nil))
	f.Add("http://[::1]:8080/s?q=a*b{c}", "http://h/{x}/*/**?k=a", "application/json", []byte(`{}`), 200, []byte(`[1,{"x":"y"}]`))
	f.Add("https://a.test/%2e%2e/\x00?q=\xff", "https://a.test/a b/c?s=\"'#:", "text/html", []byte("<link rel=canonical href='javascript:x'>"), 200, []byte(`{"t":`))
	f.Fuzz(func(t *testing.T, u1, u2, ct string, body []byte, st int, reqBody []byte) {
		samples := []Sample{
			{Method: "GET", URL: u1, Status: st, ContentType: ct, Body: body, Time: t0},
			{Method: "GET", URL: u2, Status: st, ContentType: ct, Body: body, Time: t0},
			{Method: "POST", URL: u1, Status: 200, ContentType: "application/json", Body: []byte("{}"), ReqBody: reqBody, ReqContentType: "application/json"},
			{Method: "POST", URL: u2, Status: 204, ReqBody: reqBody, ReqContentType: "application/x-www-form-urlencoded"},
			{Method: "GET", URL: u1 + "&x=1", Status: 200, ContentType: "text/html", Body: []byte(page("t", 3, u2)), Time: t0},
		}
		var layers []layerFile
		for _, f := range Infer(samples, nil, InferOptions{}) {
			pf, err := ParseFile(AutoFileName(f.Site), f.YAML)
			if err != nil {
				t.Fatalf("inferred file does not parse: %v\n%s", err, f.YAML)
			}
			if !validSiteName(f.Site) {
				t.Fatalf("bad site name %q", f.Site)
			}
			layers = append(layers, layerFile{file: pf, site: f.Site, auto: true})
		}
		if _, err := build(layers); err != nil {
			t.Fatalf("inferred files do not load: %v", err)
		}
	})
}
