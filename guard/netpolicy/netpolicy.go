// Package netpolicy is the guard's one decision about a request a browser is about to send
// (docs/guard.md, "Enforcement below the page"): request and page facts in, verdict out.
// Both enforcement layers ask it: the browser's network layer (guard/devtools, which holds
// every request of every target through the DevTools protocol's Fetch domain) and the wire
// gate (guard/gate, the MITM proxy all of the browser's traffic passes). Decide is pure;
// Policy keeps a run's facts (its mode, the values typed so far, the forms seen, an owner's
// approved submit) and asks Decide with them.
//
// Nothing a page script says reaches a decision: the method, URL and header fields are what
// the browser (or the wire) really carries.
package netpolicy

import (
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Reasons of a refusal (the trace's detail.reason).
const (
	// ReasonBlocked: a request with a method other than GET, HEAD or OPTIONS before the
	// owner's submit (under fill_and_review: never, until the owner takes the browser).
	ReasonBlocked = "submit.blocked"
	// ReasonByGet: a request carrying a value typed in this run (in its URL, a cookie or
	// another header field), or a GET to a POST form's action carrying that form's field
	// names: the application sent by GET.
	ReasonByGet = "submit.by_get"
)

// What carried the refused data (the trace's detail.carrier).
const (
	CarrierMethod     = "method"      // the method itself (ReasonBlocked)
	CarrierURL        = "url"         // the URL (path, query or fragment) holds a typed value
	CarrierCookie     = "cookie"      // a Cookie header field holds a typed value
	CarrierHeader     = "header"      // another header field holds a typed value
	CarrierFormAction = "form_action" // a GET to a POST form's action with its field names
	CarrierSize       = "size"        // a URL or header too long to be checked, while values are typed
)

// Modes of an application (docs/guard.md).
const (
	ModeFillAndReview = "fill_and_review"
	ModeAutoSubmit    = "auto_submit"
)

// Bounds of what Decide reads. A URL or the header fields together longer than these, sent
// while any value has been typed, are refused unread (CarrierSize): checking them whole
// would let a page make each decision arbitrarily slow.
const (
	MaxURLBytes    = 32 << 10
	MaxHeaderBytes = 64 << 10
	// MaxTyped and MaxForms bound the facts a Policy keeps (the first typed values, the
	// latest forms).
	MaxTyped = 1000
	MaxForms = 256
)

// Request is one request as a layer sees it. Method and URL are required; URL is absolute
// (http, https, ws or wss). Header holds the request's header fields as the layer sees
// them: the wire sees Cookie, the DevTools request stage usually does not.
type Request struct {
	Method string
	URL    string
	Header map[string][]string
	// Navigation is a frame's document load: refusing it leaves the frame where it was.
	Navigation bool
	// WebSocket is a WebSocket opening handshake (RFC 6455 section 4.1).
	WebSocket bool
	// HasBody: the request carries a body (a GET, HEAD or OPTIONS with one is decided as a
	// POST: a body is data sent).
	HasBody bool
}

// Form is a form seen on a page of the run: its action as an absolute URL (query and
// fragment ignored), its method in lower case ("get", "post", "dialog") and the names of its
// controls.
type Form struct {
	Action string
	Method string
	Fields []string
}

// Facts are what Decide knows of the run at the moment of a request.
type Facts struct {
	Mode  string   // ModeFillAndReview or ModeAutoSubmit ("" is fill_and_review)
	Sites []string // the application's sites: exact host names or "*.example.com"
	// Typed are the values filled in this run, each in Fold's form.
	Typed []string
	// Forms are the POST forms seen in this run.
	Forms []Form
	// Armed: the owner approved one submit (auto_submit, around the guard's own click) and
	// it has not passed this layer yet.
	Armed bool
	// Released: the owner has the browser (fill_and_review ended awaiting review in a browser
	// the owner sees): nothing is held any more, so that the owner can submit.
	Released bool
}

// Verdict is Decide's answer. Allow false comes with Reason and Carrier.
type Verdict struct {
	Allow   bool
	Reason  string
	Carrier string
	// UsesArm: allowed only as the owner's approved submit; the layer that lets it pass uses
	// the approval up.
	UsesArm bool
}

// SafeMethod reports whether m is GET, HEAD or OPTIONS (any case): the methods that may
// leave before the owner's submit.
func SafeMethod(m string) bool {
	switch strings.ToUpper(strings.TrimSpace(m)) {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// Decide decides one request: a method other than GET, HEAD or OPTIONS is refused
// (ReasonBlocked) unless f.Armed under auto_submit and the request goes to one of f.Sites
// (then UsesArm); any request whose URL or header fields carry a typed value (Carries), or a
// GET whose URL is a form's action with one of that form's field names in its query, is
// refused (ReasonByGet). f.Released allows everything.
func Decide(r Request, f Facts) Verdict {
	if f.Released {
		return Verdict{Allow: true}
	}
	if !SafeMethod(r.Method) || r.HasBody {
		if f.Mode == ModeAutoSubmit && f.Armed && allowedHost(f.Sites, hostOf(r.URL)) {
			return Verdict{Allow: true, UsesArm: true}
		}
		return Verdict{Reason: ReasonBlocked, Carrier: CarrierMethod}
	}
	if len(f.Typed) > 0 {
		if len(r.URL) > MaxURLBytes || headerBytes(r.Header) > MaxHeaderBytes {
			return Verdict{Reason: ReasonByGet, Carrier: CarrierSize}
		}
		if Carries(r.URL, f.Typed) {
			return Verdict{Reason: ReasonByGet, Carrier: CarrierURL}
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if headerCarries(k, v, f.Typed) {
					if strings.EqualFold(k, "Cookie") {
						return Verdict{Reason: ReasonByGet, Carrier: CarrierCookie}
					}
					return Verdict{Reason: ReasonByGet, Carrier: CarrierHeader}
				}
			}
		}
	}
	if formSubmit(r.URL, f.Forms) {
		return Verdict{Reason: ReasonByGet, Carrier: CarrierFormAction}
	}
	return Verdict{Allow: true}
}

// headerBytes is the size of the header fields, names and values.
func headerBytes(h map[string][]string) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// headerCarries checks one header field for typed values. Fields a page's script can never
// set (the forbidden request-header names of the Fetch standard that the browser writes
// from its own state: Sec-*, User-Agent in Chromium, Host, Connection, Content-Length,
// Upgrade) are skipped.
func headerCarries(name, value string, typed []string) bool {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "sec-"), n == "user-agent", n == "host", n == "connection", n == "content-length", n == "upgrade":
		return false
	case n == "cookie":
		// each cookie's name and value, each as a whole value too ("e=jane" carries "jane"
		// whole; "jane=1" carries it in the name)
		for _, c := range strings.Split(value, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(c), "=")
			if carriesIn(c, append(decoded(k), decoded(v)...), typed) {
				return true
			}
		}
		return false
	}
	return carriesIn(value, decoded(value), typed)
}

// decoded are the forms of s a comparison looks at: percent-decoded with and without "+" as
// a space (a typed "+44 ..." sent by encodeURIComponent keeps its "+"), each folded.
func decoded(s string) []string {
	return []string{Fold(unescape(s)), Fold(unescapePercent(s))}
}

// Carries reports whether raw (a URL) carries one of typed (each in Fold's form): after
// percent- and plus-decoding (up to three times, so doubly encoded data too) and Fold, a
// value of four or more characters anywhere in it, a shorter one as a whole query value or
// path segment. A value a page hashes, encrypts or encodes otherwise (base64, reversed, in
// pieces) is not recognised.
func Carries(raw string, typed []string) bool {
	if len(typed) == 0 || raw == "" {
		return false
	}
	var parts []string
	if u, err := url.Parse(raw); err == nil {
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			parts = append(parts, decoded(seg)...)
		}
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, v, _ := strings.Cut(kv, "=")
			parts = append(parts, decoded(k)...)
			parts = append(parts, decoded(v)...)
		}
		if u.Fragment != "" {
			parts = append(parts, decoded(u.EscapedFragment())...)
		}
	}
	return carriesIn(raw, parts, typed)
}

// carriesIn: a typed value of four or more characters anywhere in raw (decoded both ways
// and folded), a shorter one equal to one of parts.
func carriesIn(raw string, parts []string, typed []string) bool {
	ns := decoded(raw)
	for _, t := range typed {
		if t == "" {
			continue
		}
		if len([]rune(t)) >= 4 && (strings.Contains(ns[0], t) || strings.Contains(ns[1], t)) {
			return true
		}
		for _, p := range parts {
			if p == t {
				return true
			}
		}
	}
	return false
}

// unescape percent- and plus-decodes s up to three times (doubly encoded data too).
func unescape(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	for i := 0; i < 3; i++ {
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			break
		}
		s = strings.ReplaceAll(d, "+", " ")
	}
	return s
}

// unescapePercent percent-decodes s up to three times, leaving "+" as it is.
func unescapePercent(s string) string {
	for i := 0; i < 3; i++ {
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			break
		}
		s = d
	}
	return s
}

// formSubmit reports whether raw (a GET's URL) is the action of one of forms with at least
// one of that form's field names as a query key: the form's submission, whoever wrote the
// values.
func formSubmit(raw string, forms []Form) bool {
	if len(forms) == 0 {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return false
	}
	q := u.Query()
	key := actionKey(u)
	for _, f := range forms {
		a, err := url.Parse(f.Action)
		if err != nil || actionKey(a) != key {
			continue
		}
		for _, name := range f.Fields {
			if name == "" {
				continue
			}
			if _, ok := q[name]; ok {
				return true
			}
		}
	}
	return false
}

// actionKey is scheme, host (lower case, default port dropped) and path of u.
func actionKey(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !((strings.EqualFold(u.Scheme, "https") || strings.EqualFold(u.Scheme, "wss")) && p == "443") && !((strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "ws")) && p == "80") {
		host += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme { // a WebSocket handshake goes to the same origin's http(s) resource
	case "ws":
		scheme = "http"
	case "wss":
		scheme = "https"
	}
	return scheme + "://" + host + path
}

// hostOf is raw's host name in lower case without a port or trailing dot ("" if none).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// allowedHost: host is one of sites, exactly, or a subdomain of a "*.example.com" site.
func allowedHost(sites []string, host string) bool {
	if host == "" {
		return false
	}
	for _, s := range sites {
		s = strings.ToLower(s)
		if rest, ok := strings.CutPrefix(s, "*."); ok {
			if strings.HasSuffix(host, "."+rest) {
				return true
			}
			continue
		}
		if host == s {
			return true
		}
	}
	return false
}

var folder = cases.Fold()

// typographic quotes and dashes that are likely to be retyped as ASCII.
var typographic = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201a", "'", "\u201b", "'",
	"\u201c", "\"", "\u201d", "\"", "\u201e", "\"",
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2212", "-",
)

// Fold is the text form every comparison of the guard uses (guard.Normalize is this
// function): Unicode NFKC, case folded, typographic quotes and dashes made ASCII, every run
// of white space (and control characters, U+200B, U+00AD) one space, trimmed. Invalid UTF-8
// bytes become U+FFFD.
func Fold(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = norm.NFKC.String(s)
	s = folder.String(s)
	s = typographic.Replace(s)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '\u200b' || r == '\u00ad' {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
