package netpolicy

import (
	"net/url"
	"strings"
	"sync"
	"testing"
)

const email = "jane.doe@example.com"

func facts(mode string, typed ...string) Facts {
	f := Facts{Mode: mode, Sites: []string{"jobs.example.test", "*.greenhouse.io"}}
	for _, t := range typed {
		f.Typed = append(f.Typed, Fold(t))
	}
	return f
}

func TestDecide(t *testing.T) {
	form := Form{Action: "https://jobs.example.test/apply/submit", Method: "post", Fields: []string{"name", "email"}}
	for _, tc := range []struct {
		what    string
		r       Request
		f       Facts
		reason  string
		carrier string
	}{
		{"a GET with nothing typed", Request{Method: "GET", URL: "https://jobs.example.test/apply"}, facts(ModeFillAndReview), "", ""},
		{"a POST under fill_and_review", Request{Method: "POST", URL: "https://jobs.example.test/apply/submit"}, facts(ModeFillAndReview), ReasonBlocked, CarrierMethod},
		{"a PUT in lower case", Request{Method: "put", URL: "https://jobs.example.test/x"}, facts(ModeFillAndReview), ReasonBlocked, CarrierMethod},
		{"HEAD and OPTIONS pass", Request{Method: "OPTIONS", URL: "https://jobs.example.test/x"}, facts(ModeFillAndReview, email), "", ""},
		{"a POST under auto_submit, not armed", Request{Method: "POST", URL: "https://jobs.example.test/apply/submit"}, facts(ModeAutoSubmit), ReasonBlocked, CarrierMethod},
		{"the typed email in the query", Request{Method: "GET", URL: "https://cdn.other.test/p.gif?e=jane.doe%40example.com"}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"doubly encoded, other case", Request{Method: "GET", URL: "https://x.test/p?e=JANE.DOE%2540EXAMPLE.COM"}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"plus for space", Request{Method: "GET", URL: "https://x.test/p?n=jane+doe"}, facts(ModeFillAndReview, "Jane Doe"), ReasonByGet, CarrierURL},
		{"full-width letters (NFKC)", Request{Method: "GET", URL: "https://x.test/p?e=" + url.QueryEscape("ｊａｎｅ．ｄｏｅ＠ｅｘａｍｐｌｅ．ｃｏｍ")}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"in the path", Request{Method: "GET", URL: "https://x.test/u/jane.doe@example.com/p.gif"}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"in the fragment", Request{Method: "GET", URL: "https://x.test/p#jane.doe@example.com"}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"a short value as a whole query value", Request{Method: "GET", URL: "https://x.test/p?a=7"}, facts(ModeFillAndReview, "7"), ReasonByGet, CarrierURL},
		{"a short value inside a word is not it", Request{Method: "GET", URL: "https://x.test/p?a=1778"}, facts(ModeFillAndReview, "7"), "", ""},
		{"in a cookie", Request{Method: "GET", URL: "https://jobs.example.test/next", Header: map[string][]string{"Cookie": {"sid=1; e=jane.doe%40example.com"}}}, facts(ModeFillAndReview, email), ReasonByGet, CarrierCookie},
		{"a short value as a whole cookie value", Request{Method: "GET", URL: "https://jobs.example.test/next", Header: map[string][]string{"Cookie": {"a=7"}}}, facts(ModeFillAndReview, "7"), ReasonByGet, CarrierCookie},
		{"in another header", Request{Method: "GET", URL: "https://jobs.example.test/next", Header: map[string][]string{"X-Data": {email}}}, facts(ModeFillAndReview, email), ReasonByGet, CarrierHeader},
		{"a browser field is not read", Request{Method: "GET", URL: "https://jobs.example.test/next", Header: map[string][]string{"User-Agent": {email}}}, facts(ModeFillAndReview, email), "", ""},
		{"a WebSocket handshake", Request{Method: "GET", URL: "wss://jobs.example.test/ws?e=jane.doe@example.com", WebSocket: true}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"a URL too long to read", Request{Method: "GET", URL: "https://x.test/?" + strings.Repeat("a", MaxURLBytes)}, facts(ModeFillAndReview, email), ReasonByGet, CarrierSize},
		{"a plus kept by encodeURIComponent", Request{Method: "GET", URL: "https://x.test/p?e=jane%2Bjobs%40example.com"}, facts(ModeFillAndReview, "jane+jobs@example.com"), ReasonByGet, CarrierURL},
		{"a phone number's plus", Request{Method: "GET", URL: "https://x.test/p?t=%2B44%2020%207946%200958"}, facts(ModeFillAndReview, "+44 20 7946 0958"), ReasonByGet, CarrierURL},
		{"in an Accept header a page may set", Request{Method: "GET", URL: "https://x.test/p", Header: map[string][]string{"Accept": {email}}}, facts(ModeFillAndReview, email), ReasonByGet, CarrierHeader},
		{"in a cookie's name", Request{Method: "GET", URL: "https://x.test/p", Header: map[string][]string{"Cookie": {"jane.doe%40example.com=1"}}}, facts(ModeFillAndReview, email), ReasonByGet, CarrierCookie},
		{"an OPTIONS with a body", Request{Method: "OPTIONS", URL: "https://x.test/p", HasBody: true}, facts(ModeFillAndReview), ReasonBlocked, CarrierMethod},
		{"a query key", Request{Method: "GET", URL: "https://x.test/p?jane.doe%40example.com"}, facts(ModeFillAndReview, email), ReasonByGet, CarrierURL},
		{"a long URL with nothing typed", Request{Method: "GET", URL: "https://x.test/?" + strings.Repeat("a", MaxURLBytes)}, facts(ModeFillAndReview), "", ""},
	} {
		v := Decide(tc.r, tc.f)
		if v.Allow != (tc.reason == "") || v.Reason != tc.reason || v.Carrier != tc.carrier {
			t.Errorf("%s: %+v; want reason %q carrier %q", tc.what, v, tc.reason, tc.carrier)
		}
	}
	f := facts(ModeFillAndReview)
	f.Forms = []Form{form}
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://jobs.example.test/apply/submit?name=Mallory&email=m%40evil.test", false},
		{"https://JOBS.example.test:443/apply/submit?email=", false},
		{"https://jobs.example.test/apply/submit", true},             // no field names: a plain page
		{"https://jobs.example.test/apply/submit?utm=1", true},       // no field names
		{"https://jobs.example.test/apply/other?name=Mallory", true}, // another path
		{"http://jobs.example.test/apply/submit?name=Mallory", true}, // another scheme: another origin
		{"wss://jobs.example.test/apply/submit?name=Mallory", false}, // the same origin's WebSocket
	} {
		v := Decide(Request{Method: "GET", URL: tc.url}, f)
		if v.Allow != tc.want || (!v.Allow && v.Carrier != CarrierFormAction) {
			t.Errorf("GET %s: %+v, want allow %v", tc.url, v, tc.want)
		}
	}
	f.Released = true
	if v := Decide(Request{Method: "POST", URL: "https://jobs.example.test/apply/submit"}, f); !v.Allow {
		t.Errorf("released: %+v", v)
	}
}

// TestArmOnce: under auto_submit, Arm lets exactly one request with another method through
// each layer, to the application's sites only.
func TestArmOnce(t *testing.T) {
	var mu sync.Mutex
	var refused []Refusal
	p := New(ModeAutoSubmit, []string{"jobs.example.test"}, func(r Refusal) { mu.Lock(); refused = append(refused, r); mu.Unlock() })
	post := Request{Method: "POST", URL: "https://jobs.example.test/apply/submit"}
	if v := p.Decide(LayerNetwork, post, "Document"); v.Allow {
		t.Fatal("a POST passed before Arm")
	}
	p.Arm()
	if v := p.Decide(LayerNetwork, Request{Method: "POST", URL: "https://evil.test/x"}, "Fetch"); v.Allow {
		t.Error("an armed POST to another host passed")
	}
	if v := p.Decide(LayerNetwork, post, "Document"); !v.Allow || !v.UsesArm {
		t.Errorf("the armed POST: %+v", v)
	}
	if v := p.Decide(LayerNetwork, post, "Document"); v.Allow {
		t.Error("a second POST passed the network layer")
	}
	if v := p.Decide(LayerWire, post, ""); !v.Allow {
		t.Error("the wire refused the approved POST")
	}
	p.Arm()
	p.Disarm()
	if v := p.Decide(LayerWire, post, ""); v.Allow {
		t.Error("a POST passed after Disarm")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 4 || refused[0].Layer != LayerNetwork || refused[3].Layer != LayerWire || refused[1].Host != "evil.test" {
		t.Errorf("refusals %+v", refused)
	}
}

// TestPolicyConcurrent: both layers decide while the bridge adds values and forms.
func TestPolicyConcurrent(t *testing.T) {
	p := New(ModeFillAndReview, []string{"jobs.example.test"}, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				p.AddTyped(strings.Repeat("x", i+4) + string(rune('a'+j%26)))
				p.AddForms([]Form{{Action: "https://jobs.example.test/a", Method: "post", Fields: []string{"f"}}})
				p.Decide(LayerWire, Request{Method: "GET", URL: "https://jobs.example.test/?q=xxxxa"}, "")
			}
		}(i)
	}
	wg.Wait()
	if !p.HasTyped() || len(p.Facts(LayerWire).Forms) != 1 {
		t.Errorf("facts %+v", p.Facts(LayerWire).Forms)
	}
}

// FuzzDecide: Decide never panics, and a URL holding the typed value as a query value, in
// any case, is always refused.
func FuzzDecide(f *testing.F) {
	f.Add("GET", "https://jobs.example.test/?e=jane.doe%40example.com", "Jane.Doe@Example.com", "e=1")
	f.Add("POST", "https://x/%zz", "", "")
	f.Add("get", "wss://a/b#c", "ｊａｎｅ", "a=%")
	f.Fuzz(func(t *testing.T, method, raw, typed, cookie string) {
		fs := Facts{Mode: ModeFillAndReview, Typed: []string{Fold(typed)}, Forms: []Form{{Action: raw, Method: "post", Fields: []string{"e"}}}}
		Decide(Request{Method: method, URL: raw, Header: map[string][]string{"Cookie": {cookie}}}, fs)
		ft := Fold(typed)
		if ft == "" || strings.ContainsAny(typed, "%+") {
			return
		}
		u := "https://jobs.example.test/p?e=" + url.QueryEscape(strings.ToUpper(typed))
		if v := Decide(Request{Method: "GET", URL: u}, fs); v.Allow && Fold(strings.ToUpper(typed)) == ft {
			t.Errorf("GET %s passed with %q typed", u, typed)
		}
	})
}
