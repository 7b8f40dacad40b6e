package rules

import (
	"math"
	"net/url"
	"strings"
	"testing"
)

func TestParseText(t *testing.T) {
	cases := []struct {
		in   string
		seq  string // words joined by "|"
		set  string
		open bool
	}{
		{"AirPods Pro", "airpods|pro", "airpods|pro", true},
		{"  pro,   AIRPODS!! ", "pro|airpods", "airpods|pro", false},
		{"airp", "airp", "airp", true},
		{"airpods ", "airpods", "airpods", false},
		{"usb-c cable", "usb|c|cable", "c|cable|usb", true},
		{"men's shoes", "men|s|shoes", "men|s|shoes", true},
		{"Crème brûlée", "crème|brûlée", "brûlée|crème", true},
		{"cre\u0301me", "cre\u0301me", "cre\u0301me", true}, // a combining mark stays in its word
		{"iPhone 15 15", "iphone|15|15", "15|iphone", true},
		{"ÄPFEL Äpfel", "äpfel|äpfel", "äpfel", true},
		{"a\xffb", "a|b", "a|b", true}, // invalid UTF-8 separates words
		{"", "", "", false},
		{"?! -", "", "", false},
	}
	for _, c := range cases {
		got := ParseText(c.in)
		if s := strings.Join(got.Seq, "|"); s != c.seq {
			t.Errorf("ParseText(%q).Seq = %q, want %q", c.in, s, c.seq)
		}
		if s := strings.Join(got.Set, "|"); s != c.set {
			t.Errorf("ParseText(%q).Set = %q, want %q", c.in, s, c.set)
		}
		if got.Open != c.open {
			t.Errorf("ParseText(%q).Open = %v", c.in, got.Open)
		}
		if got.Empty() != (c.seq == "") {
			t.Errorf("ParseText(%q).Empty() = %v", c.in, got.Empty())
		}
	}
	long := strings.Repeat("word ", MaxTextLen)
	if got := ParseText(long); len(got.Raw) != MaxTextLen || strings.Join(got.Set, " ") != "w word" { // cut inside a word
		t.Errorf("long text: %d bytes kept, set %v", len(got.Raw), got.Set)
	}
}

func TestSimilarity(t *testing.T) {
	cases := []struct {
		q, r       string
		sim        float64
		completion string
		prefix     bool
	}{
		// Word order, case and punctuation do not count.
		{"pro airpods", "AirPods Pro", 1, "", false},
		{"AirPods, PRO!", "airpods pro", 1, "", true},
		{"airpods pro case", "AirPods Pro", 2.0 / 3, "", false},
		{"airpods max", "AirPods Pro", 1.0 / 3, "", false},
		{"kindle", "AirPods Pro", 0, "", false},
		// The unfinished last word is completed by the shortest word of r that it starts.
		{"airp", "airpods", 1, "airpods", true},
		{"airp", "airpods pro", 0.5, "airpods", true},
		{"airpods p", "airpods pro", 1, "pro", true},
		{"pro airp", "airpods pro", 1, "airpods", false},
		{"a", "apple airpods", 0.5, "apple", true},
		{"airpods pr", "airpods pro proper", 2.0 / 3, "pro", true},
		// A finished word is not completed.
		{"airp ", "airpods", 0, "", false},
		{"airpods ", "airpods pro", 0.5, "", true},
		// A last word that r has is not replaced.
		{"pro", "pro prompt", 0.5, "", true},
		// Not completed by a word q already has.
		{"airpods airp", "airpods", 0.5, "", false},
		{"usb", "usb c cable braided", 0.25, "", true},
		{"", "airpods", 0, "", false},
		{"airpods", "", 0, "", false},
	}
	for _, c := range cases {
		q, r := ParseText(c.q), ParseText(c.r)
		if got := Similarity(q, r); math.Abs(got-c.sim) > 1e-12 {
			t.Errorf("Similarity(%q, %q) = %v, want %v", c.q, c.r, got, c.sim)
		}
		if got := q.Completion(r); got != c.completion {
			t.Errorf("Completion(%q, %q) = %q, want %q", c.q, c.r, got, c.completion)
		}
		if got := IsPrefix(q, r); got != c.prefix {
			t.Errorf("IsPrefix(%q, %q) = %v, want %v", c.q, c.r, got, c.prefix)
		}
	}
	if !Reaches(3.0/5, 0.6) || !Reaches(2.0/3, 0.6) || Reaches(0.5, 0.6) || !Reaches(0, 0) {
		t.Error("Reaches")
	}
}

func TestNormCode(t *testing.T) {
	for in, want := range map[string]string{" SAVE10 ": "save10", "Save10": "save10", "": "", "\t": ""} {
		if got := NormCode(in); got != want {
			t.Errorf("NormCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestText(t *testing.T) {
	u := func(raw string) *url.URL {
		x, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	form, jsn := "application/x-www-form-urlencoded", "application/json"
	cases := []struct {
		name  string
		r     Request
		param string
		value string
		ok    bool
	}{
		{"query, plus and percent", Request{URL: u("https://s.test/s?k=AirPods+Pro%21&page=2")}, "k", "AirPods Pro!", true},
		{"query first of two", Request{URL: u("https://s.test/s?k=a&k=b")}, "k", "a", true},
		{"query empty value", Request{URL: u("https://s.test/s?k=")}, "k", "", true},
		{"query name case counts", Request{URL: u("https://s.test/s?K=a")}, "k", "", false},
		{"query encoded name", Request{URL: u("https://s.test/s?field%2Dkeywords=x")}, "field-keywords", "x", true},
		{"query beats body", Request{URL: u("https://s.test/s?code=Q"), Body: []byte("code=B"), ContentType: form}, "code", "Q", true},
		{"form body", Request{URL: u("https://s.test/p"), Body: []byte("cart=1&code=SAVE+10"), ContentType: form}, "code", "SAVE 10", true},
		{"json body top", Request{URL: u("https://s.test/p"), Body: []byte(`{"cart":"c","code":"SAVE10"}`), ContentType: jsn}, "code", "SAVE10", true},
		{"json body nested, document order", Request{URL: u("https://s.test/p"),
			Body: []byte(`{"a":{"b":[1,{"text":"first"}]},"text":"second"}`), ContentType: jsn}, "text", "first", true},
		{"json number", Request{URL: u("https://s.test/p"), Body: []byte(`{"code":1234.50}`), ContentType: jsn}, "code", "1234.50", true},
		{"json object value skipped", Request{URL: u("https://s.test/p"), Body: []byte(`{"code":{"x":1},"y":{"code":"in"}}`), ContentType: jsn}, "code", "in", true},
		{"json key inside a string is no key", Request{URL: u("https://s.test/p"), Body: []byte(`{"a":"code","b":["code"]}`), ContentType: jsn}, "code", "", false},
		{"json without type", Request{URL: u("https://s.test/p"), Body: []byte(` {"q":"x"}`)}, "q", "x", true},
		{"json bad", Request{URL: u("https://s.test/p"), Body: []byte(`{"q":`), ContentType: jsn}, "q", "", false},
		{"json too deep", Request{URL: u("https://s.test/p"), Body: []byte(strings.Repeat("[", 100) + `{"q":"x"}` + strings.Repeat("]", 100)), ContentType: jsn}, "q", "", false},
		{"multipart ignored", Request{URL: u("https://s.test/p"), Body: []byte("code=x"), ContentType: "multipart/form-data; boundary=x"}, "code", "", false},
		{"text body ignored", Request{URL: u("https://s.test/p"), Body: []byte("code=x"), ContentType: "text/plain"}, "code", "", false},
		{"no URL no body", Request{}, "q", "", false},
		{"no name", Request{URL: u("https://s.test/s?=x")}, "", "", false},
	}
	for _, c := range cases {
		v, ok := RequestText(c.r, c.param)
		if v != c.value || ok != c.ok {
			t.Errorf("%s: RequestText = %q, %v; want %q, %v", c.name, v, ok, c.value, c.ok)
		}
	}
}

// FuzzText checks that ParseText, Similarity, IsPrefix and RequestText never panic and keep
// their promises on any input.
func FuzzText(f *testing.F) {
	for _, s := range [][2]string{
		{"AirPods Pro", "pro airpods"}, {"airp", "airpods pro"}, {"", "x"}, {"a\xffb", "Ä ä"},
		{`{"q":"x","a":[{"q":1}]}`, "q=1&q=2"}, {"cre\u0301me ", "crème"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		q, r := ParseText(a), ParseText(b)
		for _, x := range []Text{q, r} {
			if len(x.Raw) > MaxTextLen || x.Empty() != (len(x.Set) == 0) || len(x.Set) > len(x.Seq) {
				t.Fatalf("bad text %+v", x)
			}
			if y := ParseText(x.Norm()); strings.Join(y.Set, " ") != strings.Join(x.Set, " ") {
				t.Fatalf("words of %q change when parsed again: %v vs %v", x.Raw, x.Set, y.Set)
			}
		}
		s := Similarity(q, r)
		if !(s >= 0 && s <= 1) {
			t.Fatalf("Similarity(%q, %q) = %v", a, b, s)
		}
		if !q.Empty() && Similarity(q, q) != 1 {
			t.Fatalf("Similarity(%q, itself) = %v", a, Similarity(q, q))
		}
		if !q.Empty() && !IsPrefix(q, q) {
			t.Fatalf("IsPrefix(%q, itself) = false", a)
		}
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded", ""} {
			RequestText(Request{URL: &url.URL{RawQuery: b}, Body: []byte(a), ContentType: ct}, "q")
		}
	})
}
