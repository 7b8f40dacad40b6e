package rules

import (
	"strings"
	"testing"
)

func TestParseFileFields(t *testing.T) {
	src := `# the seed's example, whole
site: amazon
hosts: ["amazon.com", "*.amazon.com"]
drop_params: [ref, qid, sr, "pd_rd_*"]
body_drop: ["*token*"]
block: ["fls-na.amazon.com", "www.amazon.com/1/batch/**"]
exclude: ["www.amazon.com/checkpoint/**"]
latest: ["*/gp/cart/*"]
xhr_not_found: { content_type: application/json, body: "{}" }
endpoints:
  - name: product
    match: "GET /*/dp/{asin}/**"
    key: "/dp/{asin}"
    keep_params: []
  - name: search
    match: "GET /s"
    host: "www.amazon.com"
    keep_params: [k, page]
    kind: search
    text_param: k
    similarity: 0.6
    fuzzy: false
    fuzzy_min: 0
  - name: add_to_cart
    match: "POST /cart/add-to-cart/**"
    kind: stateful
    body_keep: [ASIN, quantity]
  - name: promo
    match: "POST /cart/promo"
    kind: promo
    text_param: code
    invalid_code: BADCODE
`
	f, err := ParseFile("sites/amazon.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if f.Site != "amazon" || strings.Join(f.Hosts, ",") != "amazon.com,*.amazon.com" ||
		strings.Join(f.DropParams, ",") != "ref,qid,sr,pd_rd_*" || strings.Join(f.BodyDrop, ",") != "*token*" ||
		len(f.Block) != 2 || f.Exclude[0] != "www.amazon.com/checkpoint/**" || f.Latest[0] != "*/gp/cart/*" {
		t.Errorf("fields: %+v", f)
	}
	if f.XHRNotFound == nil || f.XHRNotFound.ContentType != "application/json" || f.XHRNotFound.Body != "{}" {
		t.Errorf("xhr_not_found: %+v", f.XHRNotFound)
	}
	if len(f.Endpoints) != 4 {
		t.Fatalf("endpoints: %d", len(f.Endpoints))
	}
	p, s, c, pr := f.Endpoints[0], f.Endpoints[1], f.Endpoints[2], f.Endpoints[3]
	if p.KeepParams == nil || len(p.KeepParams) != 0 {
		t.Errorf("keep_params: [] must be an empty, non-nil list: %#v", p.KeepParams)
	}
	if c.KeepParams != nil {
		t.Errorf("absent keep_params must be nil: %#v", c.KeepParams)
	}
	if p.Line != 11 || p.File != "sites/amazon.yaml" || p.Key != "/dp/{asin}" || p.Match != "GET /*/dp/{asin}/**" {
		t.Errorf("product: %+v", p)
	}
	if s.Kind != KindSearch || s.TextParam != "k" || s.Similarity == nil || *s.Similarity != 0.6 ||
		s.Fuzzy == nil || *s.Fuzzy || s.FuzzyMin == nil || *s.FuzzyMin != 0 || s.Host != "www.amazon.com" {
		t.Errorf("search: %+v", s)
	}
	if c.Similarity != nil || c.Fuzzy != nil || c.FuzzyMin != nil || strings.Join(c.BodyKeep, ",") != "ASIN,quantity" {
		t.Errorf("add_to_cart: %+v", c)
	}
	if pr.Kind != KindPromo || pr.InvalidCode != "BADCODE" || pr.TextParam != "code" {
		t.Errorf("promo: %+v", pr)
	}
}

func TestParseFileEmpty(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		f, err := ParseFile("x.yaml", []byte(src))
		if err != nil || f == nil || len(f.Hosts)+len(f.Endpoints) != 0 {
			t.Errorf("ParseFile(%q) = %+v, %v", src, f, err)
		}
	}
}

// TestParseFileErrors checks that bad files give one-line errors naming file and line.
func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown field", "site: x\nhosts: [a.test]\ndrop_param: [x]\n", `x.yaml:3: rule file: unknown field "drop_param"`},
		{"unknown endpoint field", "endpoints:\n  - name: a\n    match: /a\n    keep: [x]\n", `x.yaml:4: endpoint: unknown field "keep"`},
		{"unknown xhr field", "xhr_not_found:\n  content_type: a/b\n  status: 404\n", `x.yaml:3: xhr_not_found: unknown field "status"`},
		{"list wanted", "hosts: [a.test]\ndrop_params: utm_source\n", "x.yaml:2: field drop_params: want a list of strings, got a string"},
		{"string wanted in list", "drop_params:\n  - a\n  - {b: 1}\n", "x.yaml:3: field drop_params: want a string, got a mapping"},
		{"null in list", "drop_params: [a, ~]\n", "x.yaml:1: field drop_params: want a string, got null"},
		{"bool as string", "site: yes\n", ""}, // YAML 1.2: "yes" is a string
		{"true as string", "site: true\n", "x.yaml:1: field site: want a string, got a boolean"},
		{"top level not a mapping", "- a\n- b\n", "x.yaml:1: rule file: want a mapping, got a list"},
		{"endpoints not a list", "endpoints: {name: a}\n", "x.yaml:1: field endpoints: want a list of endpoints, got a mapping"},
		{"endpoint not a mapping", "endpoints: [a]\n", "x.yaml:1: endpoint: want a mapping, got a string"},
		{"fuzzy not bool", "endpoints:\n  - name: a\n    match: /a\n    fuzzy: \"yes\"\n", "x.yaml:4: field fuzzy: want true or false, got a string"},
		{"similarity out of range", "endpoints:\n  - name: a\n    match: /a\n    similarity: 2\n", "x.yaml:4: field similarity: want a number from 0 to 1, got 2"},
		{"fuzzy_min not a number", "endpoints:\n  - name: a\n    match: /a\n    fuzzy_min: lots\n", "x.yaml:4: field fuzzy_min: want a number from 0 to 1, got a string"},
		{"bad kind", "endpoints:\n  - name: a\n    match: /a\n    kind: cart\n", `x.yaml:4: field kind: want search, stateful or promo, got "cart"`},
		{"missing name", "endpoints:\n  - match: /a\n", "x.yaml:2: endpoint: field name is required"},
		{"missing match", "endpoints:\n  - name: a\n", `x.yaml:2: endpoint "a": field match is required`},
		{"duplicate endpoint", "endpoints:\n  - name: a\n    match: /a\n  - name: a\n    match: /b\n", `x.yaml:4: endpoint "a": name already used at line 2`},
		{"capture missing from match", "endpoints:\n  - name: p\n    match: GET /dp/{asin}\n    key: /dp/{id}\n", `x.yaml:2: endpoint "p": key "/dp/{id}": capture {id} is not in match "GET /dp/{asin}"`},
		{"bad match path", "endpoints:\n  - name: p\n    match: GET dp\n", `x.yaml:2: endpoint "p": match "GET dp": the path starts with /`},
		{"mixed segment", "endpoints:\n  - name: p\n    match: /dp-*\n", `segment "dp-*" mixes text`},
		{"query in match", "endpoints:\n  - name: p\n    match: /s?k=1\n", "the path holds no query"},
		{"capture twice", "endpoints:\n  - name: p\n    match: /{a}/{a}\n", "capture {a} used twice"},
		{"unbalanced key", "endpoints:\n  - name: p\n    match: /{a}\n    key: /{a\n", "unbalanced {"},
		{"search without text_param", "endpoints:\n  - name: s\n    match: /s\n    kind: search\n", `endpoint "s": kind search needs text_param`},
		{"promo without invalid_code", "endpoints:\n  - name: s\n    match: /s\n    kind: promo\n    text_param: c\n", `kind promo needs invalid_code`},
		{"bad glob", "block:\n  - ok.test\n  - \"a.test/[x\"\n", `x.yaml:3: field block: "a.test/[x": bad glob`},
		{"scheme in location", "exclude: [\"https://a.test/x\"]\n", "without a scheme"},
		{"location without host", "latest: [\"/cart\"]\n", "starts with a host"},
		{"host with path", "hosts: [a.test/x]\n", `x.yaml:1: field hosts: "a.test/x": a host pattern holds no path`},
		{"endpoint host with path", "endpoints:\n  - name: a\n    match: /a\n    host: a.test/x\n", `x.yaml:4: field host: "a.test/x"`},
		{"empty name", "drop_params: [\"\"]\n", `x.yaml:1: field drop_params: "": empty name`},
		{"xhr without type", "xhr_not_found: {body: x}\n", "x.yaml:1: field xhr_not_found: content_type is required"},
		{"duplicate key", "hosts: [a]\nhosts: [b]\n", "x.yaml:2: field hosts: already set at line 1"},
		{"alias", "a: &x [1]\n", `x.yaml:1: rule file: unknown field "a"`},
		{"alias value", "hosts: &h [a.test]\ndrop_params: *h\n", "x.yaml:2: field drop_params: YAML aliases are not supported"},
		{"merge key", "<<: {hosts: [a]}\n", "merge keys"},
		{"syntax error", "hosts: [a.test]\ndrop_params: [a, b\n", "x.yaml:2: did not find expected ',' or ']'"},
		{"tab indentation", "hosts:\n\t- a\n", "x.yaml:2: found character that cannot start any token"},
		{"syntax error on line 1", "hosts: [a.test\n", "x.yaml:2: did not find expected ',' or ']'"},
		{"syntax error in a block", "hosts: [a]\nendpoints:\n  - name: a\n  match: /a\n", "x.yaml:3: did not find expected '-' indicator"},
		{"mapping in a plain scalar", "hosts: [a]\nsite: a: b\n", "x.yaml:2: mapping values are not allowed"},
		{"two documents", "hosts: [a]\n---\nhosts: [b]\n", "x.yaml:2: more than one YAML document"},
		{"too big", "#" + strings.Repeat("x", MaxFileSize), "x.yaml: rule file is 1048577 bytes, more than the limit of 1048576"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile("x.yaml", []byte(tc.src))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "x.yaml") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line starting with the file name", err)
			}
		})
	}
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"utm_*", "utm_source", true},
		{"utm_*", "UTM_Source", true},
		{"utm_*", "utm_", true},
		{"utm_*", "xutm_source", false},
		{"*token*", "csrfToken", true},
		{"*token*", "token", true},
		{"*token*", "tok", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"filter[0]", "filter[0]", true}, // brackets are literal in name patterns
		{"a?c", "abc", false},            // so is '?'
		{"*.amazon.com", "www.smile.amazon.com", true},
		{"*.amazon.com", "amazon.com", false},
	}
	for _, tc := range tests {
		if got := wildcardMatch(tc.pat, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
}
