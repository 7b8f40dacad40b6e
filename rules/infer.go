package rules

// infer.go: site rules inferred from a recording (docs/rules.md, "Inferred rules"). Infer
// reads recorded exchanges (never WARC files) and proposes, per site, the rules a person
// would otherwise write by hand: bot-check pages to exclude, volatile parameters to drop,
// page identity from <link rel="canonical">, search endpoints and trackers to block.

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/publicsuffix"

	"github.com/pab-dev/pab/internal/textcut"
)

// Sample is one recorded exchange as rule inference sees it.
type Sample struct {
	// Method is the request method ("GET"); empty means GET.
	Method string
	// URL is the absolute request URL (http or https); other samples are ignored.
	URL string
	// Status is the response status code.
	Status int
	// ContentType is the response Content-Type header.
	ContentType string
	// Body is the decoded response payload, possibly cut to a bound by the caller (HTML
	// pages are only read up to InferOptions.MaxHTMLBytes anyway).
	Body []byte
	// Digest is the lowercase hex sha256 of the whole decoded payload; "" means the sha256
	// of Body.
	Digest string
	// Size is the whole decoded payload length in bytes; a value below len(Body) (such as
	// 0, unset) means len(Body).
	Size int64
	// Time is when the exchange was recorded (the response WARC-Date); the zero time
	// disables the timestamp test for this sample.
	Time time.Time
	// ReqBody and ReqContentType are the request body and its Content-Type.
	ReqBody        []byte
	ReqContentType string
}

// InferOptions tunes Infer. The zero value gives the defaults.
type InferOptions struct {
	// MinAgree is how many distinct recorded URLs must agree before a page identity
	// endpoint is proposed; 0 means 2.
	MinAgree int
	// MaxHTMLBytes bounds the part of an HTML body that is parsed; 0 means 2 MiB.
	MaxHTMLBytes int
}

// InferredFile is the inferred rules of one site, ready to be written as
// <Site>.auto.yaml in a task's rules directory.
type InferredFile struct {
	// Site is the site name (the file name without .auto.yaml): the name of the site in
	// base whose hosts match, else the registrable domain of the hosts (eTLD+1, e.g.
	// "amazon.com"), else the host name.
	Site string
	// Hosts are the host names recorded for the site, sorted.
	Hosts []string
	// YAML is the rule file text. Each inferred rule carries a comment with its evidence.
	// It always parses with ParseFile.
	YAML []byte
	// File is YAML parsed, with Path "<Site>.auto.yaml".
	File *File
}

// AutoFileName returns the file name of the inferred rules of site: "<site>.auto.yaml".
func AutoFileName(site string) string { return site + ".auto.yaml" }

// Defaults and bounds of inference.
const (
	defaultMinAgree     = 2
	defaultMaxHTMLBytes = 2 << 20
	// nearEmptyBytes is the largest payload that counts as a tracker's near-empty answer.
	nearEmptyBytes = 64
	// unchangedMinBytes is the least payload size whose equality counts as "the response
	// did not change" when a parameter did.
	unchangedMinBytes = 64
	// botCheckMaxWords bounds the visible words of a page whose text names a bot check;
	// botWidgetMaxWords bounds those of a page that only embeds a captcha widget.
	botCheckMaxWords  = 300
	botWidgetMaxWords = 100
	// timestampWindow is how far an epoch value may be from the sample's time.
	timestampWindow = 24 * time.Hour
	// maxEvidence bounds the length of an evidence comment, in bytes.
	maxEvidence = 200
	// maxCompared bounds the loads of one request (all but one parameter equal) whose
	// responses are compared pairwise; later loads are not compared.
	maxCompared = 200
)

// searchParams are the query parameter names taken as the free text of a search, in order
// of preference when a path carries several.
var searchParams = []string{"q", "k", "query", "search", "keywords", "keyword", "field-keywords", "search_query", "searchTerm", "term", "s", "prefix"}

// beaconWords are path words (segments split at non-alphanumerics) of tracker endpoints.
var beaconWords = []string{"analytics", "batch", "beacon", "beacons", "collect", "event", "events", "log", "logs", "logging", "matomo", "metrics", "ping", "piwik", "pixel", "px", "telemetry", "track", "tracking", "uedata"}

// challengeSegments are path segments of bot-check pages (besides any starting "captcha").
var challengeSegments = []string{"checkpoint", "challenge-platform", "validatecaptcha"}

// botPhrases are visible texts of bot-check pages (lower case, spaces collapsed).
var botPhrases = []string{
	"i am human", "i'm not a robot", "i am not a robot", "verify you are human",
	"verify you are a human", "verifying you are human", "are you a robot", "are you a human",
	"unusual traffic", "just a moment", "checking your browser", "checking if the site connection is secure",
	"enter the characters you see below", "type the characters you see", "press & hold", "press and hold to confirm",
	"complete the security check", "please complete the captcha",
}

// captchaHosts are hosts (or host/path prefixes) whose frames and scripts are captchas.
var captchaHosts = []string{"challenges.cloudflare.com", "www.google.com/recaptcha", "www.recaptcha.net", "recaptcha.net", "hcaptcha.com", "newassets.hcaptcha.com", "js.hcaptcha.com", "geo.captcha-delivery.com", "captcha.px-cdn.net"}

// captchaClasses are class names (and ids) of captcha widgets.
var captchaClasses = []string{"g-recaptcha", "h-captcha", "cf-turnstile", "challenge-form", "cf-challenge-running"}

// Infer proposes rules for the sites of samples (one file per site that gets at least one
// rule, sorted by site name). base is the rules already in effect (sites/ and the task's
// hand-written files, nil for none): what they already drop, block, exclude or give an
// endpoint is not inferred again. Samples are taken in recording order; the output depends
// only on them, base and opts, never on map order. See docs/rules.md, "Inferred rules".
func Infer(samples []Sample, base *Set, opts InferOptions) []*InferredFile {
	if opts.MinAgree <= 0 {
		opts.MinAgree = defaultMinAgree
	}
	if opts.MaxHTMLBytes <= 0 {
		opts.MaxHTMLBytes = defaultMaxHTMLBytes
	}
	inf := &inferrer{base: base, opts: opts, sites: map[string]*siteRules{}}
	for i := range samples {
		inf.add(&samples[i])
	}
	inf.botChecks()
	inf.trackers()
	inf.volatile()
	inf.identity()
	inf.searches()

	names := make([]string, 0, len(inf.sites))
	for name := range inf.sites {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []*InferredFile
	for _, name := range names {
		if f := inf.sites[name].file(); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// obs is one usable sample, parsed once.
type obs struct {
	s                  *Sample
	site               string
	method             string
	u                  *url.URL
	hostPort, hostname string
	path               string
	params             []Param // query, in request order
	mt                 string  // response media type
	digest             string
	size               int64
	page               *pageInfo // HTML facts, nil for other bodies
	blocked, excluded  bool      // by base or by an inferred rule
}

// rule is one inferred list item or endpoint with its evidence.
type rule struct {
	value    string
	evidence string
	endpoint *Endpoint
}

// siteRules collects what was inferred for one site.
type siteRules struct {
	name      string
	hosts     []string
	drop      []rule
	bodyDrop  []rule
	block     []rule
	exclude   []rule
	endpoints []rule
}

type inferrer struct {
	base  *Set
	opts  InferOptions
	obs   []*obs
	sites map[string]*siteRules
}

func (inf *inferrer) add(s *Sample) {
	u, err := url.Parse(strings.TrimSpace(s.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	hp, hn := normHost(u.Host)
	if hn == "" {
		return
	}
	o := &obs{s: s, method: normMethod(s.Method), u: u, hostPort: hp, hostname: hn, path: normPath(urlPath(u))}
	if o.method == "" {
		o.method = "GET"
	}
	o.params = parseParams(u.RawQuery, nil)
	o.mt = mediaType(s.ContentType)
	o.size = max(s.Size, int64(len(s.Body)))
	o.digest = strings.ToLower(s.Digest)
	if o.digest == "" {
		sum := sha256.Sum256(s.Body)
		o.digest = hex.EncodeToString(sum[:])
	}
	if o.mt == "text/html" || o.mt == "application/xhtml+xml" {
		o.page = parsePage(s.Body, inf.opts.MaxHTMLBytes, u)
	}
	o.blocked = inf.base.Blocked(u)
	o.excluded = inf.base.Excluded(u)
	o.site = inf.siteName(hp, hn)
	st := inf.sites[o.site]
	if st == nil {
		st = &siteRules{name: o.site}
		inf.sites[o.site] = st
	}
	if !slices.Contains(st.hosts, hn) {
		st.hosts = append(st.hosts, hn)
	}
	inf.obs = append(inf.obs, o)
}

// siteName is the name of the first site of base (other than _default) whose hosts match,
// else the registrable domain, else the host name, made safe as a file name.
func (inf *inferrer) siteName(hostPort, hostname string) string {
	if inf.base != nil {
		for _, st := range inf.base.sites {
			if !st.isDefault && st.applies(hostPort, hostname) && validSiteName(st.name) {
				return st.name
			}
		}
	}
	name := hostname
	if net.ParseIP(strings.Trim(hostname, "[]")) == nil {
		if d, err := publicsuffix.EffectiveTLDPlusOne(hostname); err == nil {
			name = d
		}
	}
	return safeSiteName(name)
}

// safeSiteName maps s to a file name stem: lower-case letters, digits, '.', '-' and '_';
// anything else becomes '_'; a leading dot or underscore becomes 'x'.
func safeSiteName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "x"
	}
	if b[0] == '.' || b[0] == '_' {
		b[0] = 'x'
	}
	return string(b)
}

// validSiteName reports whether name can be the stem of an .auto.yaml file: not empty,
// not _default, no path separator or NUL, not hidden (a leading dot), at most 200 bytes.
func validSiteName(name string) bool {
	return name != "" && name != DefaultSite && len(name) <= 200 && !strings.ContainsAny(name, "/\\\x00") &&
		!strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".auto")
}

func (inf *inferrer) usable(o *obs) bool { return !o.blocked && !o.excluded }

func is2xx(status int) bool { return status >= 200 && status < 300 }

// ---- bot checks ----

func (inf *inferrer) botChecks() {
	type loc struct {
		site, pattern string
		evidence      string
		prefix        bool // pattern ends in /**
		host, path    string
	}
	var locs []loc
	seen := map[string]bool{}
	for _, o := range inf.obs {
		if o.excluded || o.blocked {
			continue
		}
		reason, prefixPath := botCheck(o)
		if reason == "" {
			continue
		}
		l := loc{site: o.site, host: o.hostPort, evidence: reason + ": " + cut(o.s.URL, 80)}
		if prefixPath != "" {
			l.path, l.prefix = prefixPath, true
			l.pattern = hostGlob(o.hostPort) + globEscape(prefixPath) + "/**"
		} else {
			l.path = o.path
			l.pattern = hostGlob(o.hostPort) + globEscape(o.path)
		}
		if seen[l.pattern] {
			continue
		}
		seen[l.pattern] = true
		locs = append(locs, l)
	}
	for _, l := range locs {
		// An exact path is excluded only when every recording of it is a bot check.
		ok := true
		if !l.prefix {
			for _, o := range inf.obs {
				if o.hostPort == l.host && o.path == l.path && !o.excluded {
					if r, _ := botCheck(o); r == "" {
						ok = false
						break
					}
				}
			}
		}
		if !ok || checkLocation(l.pattern) != nil {
			continue
		}
		lc, _ := compileLocation(l.pattern)
		st := inf.sites[l.site]
		st.exclude = append(st.exclude, rule{value: l.pattern, evidence: l.evidence})
		for _, o := range inf.obs {
			if lc.match(o.hostPort, o.hostname, o.path) {
				o.excluded = true
			}
		}
	}
}

// botCheck says why o is a bot-check page ("" when it is not) and, when its path names
// the check, the path up to that segment.
func botCheck(o *obs) (reason, prefixPath string) {
	segs := strings.Split(o.path[1:], "/")
	for i, s := range segs {
		ls := strings.ToLower(s)
		if slices.Contains(challengeSegments, ls) || strings.HasPrefix(ls, "captcha") {
			return fmt.Sprintf("bot-check path segment %q", s), "/" + strings.Join(segs[:i+1], "/")
		}
	}
	for _, p := range o.params {
		if strings.HasPrefix(strings.ToLower(p.Name), "__cf_chl_") {
			return fmt.Sprintf("Cloudflare challenge parameter %s", p.Name), ""
		}
	}
	pg := o.page
	if pg == nil {
		return "", ""
	}
	if pg.phrase != "" && pg.words <= botCheckMaxWords {
		return fmt.Sprintf("bot-check text %q", pg.phrase), ""
	}
	if pg.widget != "" && pg.words <= botWidgetMaxWords && pg.inputs == 0 {
		return fmt.Sprintf("captcha %s on a page of %d words", pg.widget, pg.words), ""
	}
	return "", ""
}

// pageInfo is what inference reads from an HTML page.
type pageInfo struct {
	canonical *url.URL // <link rel=canonical href>, resolved
	words     int      // visible words (title and body text, not scripts or styles)
	phrase    string   // a bot-check phrase found in the visible text
	widget    string   // a captcha widget found
	inputs    int      // visible form fields (not hidden, submit or button)
}

// parsePage parses at most limit bytes of body as HTML (golang.org/x/net/html).
func parsePage(body []byte, limit int, base *url.URL) *pageInfo {
	if len(body) > limit {
		body = body[:limit]
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	pg := &pageInfo{}
	var text strings.Builder
	const maxText = 64 << 10
	var walk func(n *html.Node, hidden bool)
	walk = func(n *html.Node, hidden bool) {
		switch n.Type {
		case html.TextNode:
			if !hidden && text.Len() < maxText {
				text.WriteString(n.Data)
				text.WriteByte(' ')
			}
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template:
				hidden = true
				if n.DataAtom == atom.Script {
					pg.noteWidgetSrc(attr(n, "src"))
				}
			case atom.Link:
				if pg.canonical == nil && hasToken(attr(n, "rel"), "canonical") {
					if h := strings.TrimSpace(attr(n, "href")); h != "" {
						if cu, err := base.Parse(h); err == nil && (cu.Scheme == "http" || cu.Scheme == "https") {
							pg.canonical = cu
						}
					}
				}
			case atom.Iframe:
				pg.noteWidgetSrc(attr(n, "src"))
			case atom.Input, atom.Textarea, atom.Select:
				switch strings.ToLower(attr(n, "type")) {
				case "hidden", "submit", "button", "image", "reset":
				default:
					pg.inputs++
				}
			}
			for _, c := range captchaClasses {
				if pg.widget == "" && (hasToken(attr(n, "class"), c) || strings.EqualFold(attr(n, "id"), c)) {
					pg.widget = "element ." + c
				}
			}
			if id := strings.ToLower(attr(n, "id")); pg.widget == "" && strings.HasPrefix(id, "cf-chl") {
				pg.widget = "element #" + id
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, hidden)
		}
	}
	walk(doc, false)
	words := strings.Fields(strings.ToLower(text.String()))
	pg.words = len(words)
	joined := " " + strings.Join(words, " ") + " "
	joined = strings.NewReplacer("\u2019", "'", "\u00a0", " ").Replace(joined)
	for _, p := range botPhrases {
		if strings.Contains(joined, " "+p) {
			pg.phrase = p
			break
		}
	}
	return pg
}

func (pg *pageInfo) noteWidgetSrc(src string) {
	if pg.widget != "" || src == "" {
		return
	}
	u, err := url.Parse(strings.TrimSpace(src))
	if err != nil {
		return
	}
	hp := strings.ToLower(u.Hostname()) + u.Path
	for _, h := range captchaHosts {
		if hp == h || strings.HasPrefix(hp, h+"/") || strings.HasSuffix(u.Hostname(), "."+h) {
			pg.widget = "frame or script from " + h
			return
		}
	}
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && strings.EqualFold(a.Key, name) {
			return a.Val
		}
	}
	return ""
}

// hasToken reports whether the space-separated list s holds tok (ASCII case ignored).
func hasToken(s, tok string) bool {
	for _, f := range strings.Fields(s) {
		if strings.EqualFold(f, tok) {
			return true
		}
	}
	return false
}

// ---- trackers ----

// nearEmpty reports whether o's response is what a beacon answers: 204, a 2xx payload of
// at most nearEmptyBytes, or a 1x1 GIF.
func nearEmpty(o *obs) bool {
	if o.s.Status == 204 {
		return true
	}
	if !is2xx(o.s.Status) {
		return false
	}
	return o.size <= nearEmptyBytes || isPixelGIF(o.s.Body)
}

// isPixelGIF reports whether b is a GIF image of 1x1 pixels (GIF89a logical screen).
func isPixelGIF(b []byte) bool {
	if len(b) < 10 || !(bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a"))) {
		return false
	}
	return b[6] == 1 && b[7] == 0 && b[8] == 1 && b[9] == 0
}

// beaconSegment returns the index of the first path segment holding a beacon word, or -1.
func beaconSegment(path string) int {
	for i, s := range strings.Split(path[1:], "/") {
		words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
			return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
		})
		for _, w := range words {
			if slices.Contains(beaconWords, w) {
				return i
			}
		}
	}
	return -1
}

func (inf *inferrer) trackers() {
	// Hosts first: a host all of whose recordings are beacons is blocked whole.
	var hosts []string
	byHost := map[string][]*obs{}
	for _, o := range inf.obs {
		if _, ok := byHost[o.hostPort]; !ok {
			hosts = append(hosts, o.hostPort)
		}
		byHost[o.hostPort] = append(byHost[o.hostPort], o)
	}
	for _, h := range hosts {
		list := byHost[h]
		all, fresh := true, false
		for _, o := range list {
			if o.excluded || !nearEmpty(o) || beaconSegment(o.path) < 0 {
				all = false
				break
			}
			if !o.blocked {
				fresh = true
			}
		}
		if !all || !fresh {
			continue
		}
		pattern := hostGlob(h)
		if checkLocation(pattern) != nil {
			continue
		}
		st := inf.sites[list[0].site]
		st.block = append(st.block, rule{value: pattern, evidence: fmt.Sprintf("host serves only beacons: %s, e.g. %s", answers(len(list)), cut(list[0].s.URL, 80))})
		for _, o := range list {
			o.blocked = true
		}
	}
	// Then paths: host/<path through the beacon word>, when everything under it is near-empty.
	type cand struct {
		host, prefix string
		first        *obs
	}
	var cands []cand
	seen := map[string]bool{}
	for _, o := range inf.obs {
		if o.blocked || o.excluded || !nearEmpty(o) {
			continue
		}
		i := beaconSegment(o.path)
		if i < 0 {
			continue
		}
		segs := strings.Split(o.path[1:], "/")
		prefix := "/" + strings.Join(segs[:i+1], "/")
		if k := o.hostPort + prefix; !seen[k] {
			seen[k] = true
			cands = append(cands, cand{host: o.hostPort, prefix: prefix, first: o})
		}
	}
	for _, c := range cands {
		n, deeper, ok := 0, false, true
		for _, o := range byHost[c.host] {
			if o.path != c.prefix && !strings.HasPrefix(o.path, c.prefix+"/") {
				continue
			}
			if !nearEmpty(o) {
				ok = false
				break
			}
			n++
			deeper = deeper || o.path != c.prefix
		}
		if !ok {
			continue
		}
		pattern := hostGlob(c.host) + globEscape(c.prefix)
		if deeper {
			pattern += "/**"
		}
		if checkLocation(pattern) != nil {
			continue
		}
		st := inf.sites[c.first.site]
		st.block = append(st.block, rule{value: pattern, evidence: fmt.Sprintf("beacon: %s (status %d, %d bytes), e.g. %s %s", answers(n), c.first.s.Status, c.first.size, c.first.method, cut(c.first.s.URL, 80))})
		lc, _ := compileLocation(pattern)
		for _, o := range byHost[c.host] {
			if lc.match(o.hostPort, o.hostname, o.path) {
				o.blocked = true
			}
		}
	}
}

func answers(n int) string {
	if n == 1 {
		return "1 near-empty answer"
	}
	return strconv.Itoa(n) + " near-empty answers"
}

// hostGlob writes a host (with port when not default) as the host part of a location.
func hostGlob(hostPort string) string {
	if strings.HasPrefix(hostPort, "[") {
		return hostPort // compileLocation escapes the brackets of an IPv6 literal
	}
	return globEscape(hostPort)
}

// globEscape escapes doublestar's special characters so that s matches itself.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]{}\,`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ---- volatile parameters ----

// field is a query parameter or a request body field of one sample.
type field struct {
	name, leaf, value string
}

func (inf *inferrer) baseDrops(o *obs, name string, body bool) bool {
	if inf.base == nil {
		return false
	}
	var buf [maxSites]*site
	for _, st := range inf.base.applicable(buf[:0], o.hostPort, o.hostname) {
		list := st.drop
		if body {
			list = st.bodyDrop
		}
		if matchAnyName(list, name) {
			return true
		}
	}
	return false
}

// queryFields and bodyFields list o's parameters not already dropped by base.
func (inf *inferrer) queryFields(o *obs) []field {
	var out []field
	for _, p := range o.params {
		if !inf.baseDrops(o, p.Name, false) {
			out = append(out, field{name: p.Name, leaf: p.Name, value: p.Value})
		}
	}
	return out
}

func (inf *inferrer) bodyFields(o *obs) []field {
	b := o.s.ReqBody
	if len(b) == 0 || len(b) > MaxStructuredBody {
		return nil
	}
	var out []field
	mt := mediaType(o.s.ReqContentType)
	switch {
	case mt == "application/x-www-form-urlencoded":
		for _, p := range parseParams(string(b), nil) {
			out = append(out, field{name: p.Name, leaf: p.Name, value: p.Value})
		}
	case isJSONType(mt) || looksLikeJSON(b):
		if jsonDepth(b, MaxJSONDepth) > MaxJSONDepth {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil
		}
		flatten(v, "", "", &out)
	}
	kept := out[:0]
	for _, f := range out {
		if !inf.baseDrops(o, f.leaf, true) {
			kept = append(kept, f)
		}
	}
	return kept
}

// flatten lists the scalar members of a JSON value: name is the dotted path, leaf the
// member name (array elements have the leaf of their array).
func flatten(v any, path, leaf string, out *[]field) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			flatten(x[k], path+"."+k, k, out)
		}
	case []any:
		for i, e := range x {
			flatten(e, path+"."+strconv.Itoa(i), leaf, out)
		}
	case string:
		if leaf != "" {
			*out = append(*out, field{name: path, leaf: leaf, value: x})
		}
	case json.Number:
		if leaf != "" {
			*out = append(*out, field{name: path, leaf: leaf, value: x.String()})
		}
	}
}

// volatileCase is the evidence gathered for one parameter name at one request path.
type volatileCase struct {
	site, leaf, where string
	values            []string
	times             []time.Time
	allRandom         bool
	allStamps         bool
	unchanged         int  // groups where other values left the response unchanged
	changed           bool // a group where another value changed the response
}

func (inf *inferrer) volatile() {
	for _, body := range []bool{false, true} {
		inf.volatileKind(body)
	}
}

func (inf *inferrer) volatileKind(body bool) {
	type groupKey struct{ site, method, host, path, name string }
	cases := map[groupKey]*volatileCase{}
	var order []groupKey
	type restEntry struct {
		value, digest string
		size          int64
		status        int
	}
	rest := map[string][]restEntry{} // key: group + everything else of the request
	var restOrder []string
	restCase := map[string]groupKey{}
	for _, o := range inf.obs {
		if !inf.usable(o) {
			continue
		}
		var fs, other []field
		if body {
			fs, other = inf.bodyFields(o), inf.queryFields(o)
		} else {
			fs, other = inf.queryFields(o), inf.bodyFields(o)
		}
		for i, f := range fs {
			if f.leaf == "" || strings.Contains(f.leaf, "*") || slices.Contains(searchParams, f.leaf) {
				continue
			}
			gk := groupKey{o.site, o.method, o.hostPort, o.path, f.name}
			c := cases[gk]
			if c == nil {
				c = &volatileCase{site: o.site, leaf: f.leaf, where: o.method + " " + o.hostPort + o.path, allRandom: true, allStamps: true}
				cases[gk] = c
				order = append(order, gk)
			}
			c.values = append(c.values, f.value)
			c.times = append(c.times, o.s.Time)
			c.allRandom = c.allRandom && looksRandom(f.value)
			c.allStamps = c.allStamps && nearTimestamp(f.value, o.s.Time)
			// Everything else of the request, in a stable form.
			var sb strings.Builder
			fmt.Fprintf(&sb, "%s\x00%s\x00%s\x00%s", o.method, o.hostPort, o.path, f.name)
			for j, g := range fs {
				if j != i {
					fmt.Fprintf(&sb, "\x00%s=%s", g.name, g.value)
				}
			}
			sb.WriteString("\x01")
			for _, g := range other {
				fmt.Fprintf(&sb, "\x00%s=%s", g.name, g.value)
			}
			rk := sb.String()
			if _, ok := rest[rk]; !ok {
				restOrder = append(restOrder, rk)
				restCase[rk] = gk
			}
			rest[rk] = append(rest[rk], restEntry{value: f.value, digest: o.digest, size: o.size, status: o.s.Status})
		}
	}
	for _, rk := range restOrder {
		list := rest[rk]
		if len(list) > maxCompared {
			list = list[:maxCompared]
		}
		c := cases[restCase[rk]]
		for i := 1; i < len(list); i++ {
			for j := 0; j < i; j++ {
				a, b := list[j], list[i]
				if a.value == b.value || !is2xx(a.status) || !is2xx(b.status) {
					continue
				}
				if a.digest == b.digest && a.size >= unchangedMinBytes {
					c.unchanged++
				} else if a.digest != b.digest {
					c.changed = true
				}
			}
		}
	}
	// A name whose other values changed a response anywhere on the site is not dropped for
	// leaving some other response unchanged: drop_params applies to every path of the site.
	type siteName struct{ site, leaf string }
	matters := map[siteName]bool{}
	for _, gk := range order {
		if c := cases[gk]; c.changed {
			matters[siteName{c.site, strings.ToLower(c.leaf)}] = true
		}
	}
	type found struct{ leaf, evidence string }
	bySite := map[string][]found{}
	for _, gk := range order {
		c := cases[gk]
		distinct := len(c.values) >= 2
		seenVals := map[string]bool{}
		for _, v := range c.values {
			if seenVals[v] {
				distinct = false
			}
			seenVals[v] = true
		}
		var why string
		switch {
		case c.allStamps:
			why = fmt.Sprintf("epoch time within a day of the recording (%s)", short(c.values[0]))
		case c.allRandom && distinct:
			why = fmt.Sprintf("%d loads, a new random-looking value each time (%s, %s)", len(c.values), short(c.values[0]), short(c.values[1]))
		case c.unchanged > 0 && !matters[siteName{c.site, strings.ToLower(c.leaf)}]:
			why = fmt.Sprintf("other values left the response unchanged (%s, %s)", short(c.values[0]), short(c.values[len(c.values)-1]))
		default:
			continue
		}
		bySite[c.site] = append(bySite[c.site], found{leaf: c.leaf, evidence: c.where + ": " + why})
	}
	for site, fs := range bySite {
		st := inf.sites[site]
		for _, f := range fs {
			list := &st.drop
			if body {
				list = &st.bodyDrop
			}
			if slices.ContainsFunc(*list, func(r rule) bool { return strings.EqualFold(r.value, f.leaf) }) {
				continue
			}
			*list = append(*list, rule{value: f.leaf, evidence: f.evidence})
		}
	}
}

// looksRandom reports whether v looks like a generated token: a UUID, a hex string of 16
// or more digits with letters and digits, or a base64-like token of 20 or more characters
// mixing upper case, lower case and digits with frequent changes between them.
func looksRandom(v string) bool {
	if len(v) < 16 || len(v) > 4096 {
		return false
	}
	hexOnly, digit, upper, lower, other := true, false, false, false, false
	changes, prev := 0, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		cls := 0
		switch {
		case '0' <= c && c <= '9':
			digit, cls = true, 1
		case 'a' <= c && c <= 'z':
			lower, cls = true, 2
		case 'A' <= c && c <= 'Z':
			upper, cls = true, 3
		case c == '-' || c == '_' || c == '+' || c == '/' || c == '=':
			cls = 4
		default:
			other = true
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || c == '-') {
			hexOnly = false
		}
		if i > 0 && cls != prev {
			changes++
		}
		prev = cls
	}
	if other {
		return false
	}
	if hexOnly {
		n := len(strings.ReplaceAll(v, "-", ""))
		return n >= 16 && digit && (lower || upper) && entropy(v) >= 3
	}
	classes := 0
	for _, b := range []bool{digit, upper, lower} {
		if b {
			classes++
		}
	}
	return len(v) >= 20 && classes == 3 && changes*3 >= len(v) && entropy(v) >= 4
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var n [256]int
	for i := 0; i < len(s); i++ {
		n[s[i]]++
	}
	h := 0.0
	for _, c := range n {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// nearTimestamp reports whether v is Unix time in seconds (10 digits) or milliseconds (13
// digits) within timestampWindow of t.
func nearTimestamp(v string, t time.Time) bool {
	if t.IsZero() || (len(v) != 10 && len(v) != 13) {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return false
	}
	var vt time.Time
	if len(v) == 10 {
		vt = time.Unix(n, 0)
	} else {
		vt = time.UnixMilli(n)
	}
	d := vt.Sub(t)
	return d <= timestampWindow && d >= -timestampWindow
}

// ---- page identity ----

// idSegment reports whether a path segment looks like an identifier rather than a word
// or a slug: digits only (3 or more), an ASIN-like code of upper-case letters and digits
// (8 to 20, with digits), a code like Target's "A-12345678", or a UUID or hex id.
func idSegment(s string) bool {
	if len(s) < 3 || len(s) > 64 {
		return false
	}
	if allDigits(s) {
		return true
	}
	if looksRandom(s) {
		return true
	}
	upDigits, digits := true, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' {
			digits++
		} else if !('A' <= c && c <= 'Z') {
			upDigits = false
		}
	}
	if upDigits && digits > 0 && len(s) >= 8 && len(s) <= 20 {
		return true
	}
	if pfx, num, ok := strings.Cut(s, "-"); ok && len(pfx) >= 1 && len(pfx) <= 3 && len(num) >= 4 && allDigits(num) {
		for i := 0; i < len(pfx); i++ {
			if !('A' <= pfx[i] && pfx[i] <= 'Z') {
				return false
			}
		}
		return true
	}
	return false
}

// canonicalID returns the anchor segment and the id of a canonical path: the last id-like
// segment and the literal segment before it.
func canonicalID(path string) (anchor, id string, ok bool) {
	segs := strings.Split(normPath(path)[1:], "/")
	for i := len(segs) - 1; i >= 1; i-- {
		if idSegment(segs[i]) && !idSegment(segs[i-1]) && segs[i-1] != "" {
			return segs[i-1], segs[i], true
		}
	}
	return "", "", false
}

func (inf *inferrer) identity() {
	type idKey struct{ site, host, anchor string }
	type hit struct {
		o          *obs
		id         string
		suffixed   bool // segments after the id
		canonQuery []string
	}
	hits := map[idKey][]hit{}
	var order []idKey
	for _, o := range inf.obs {
		if !inf.usable(o) || o.page == nil || o.page.canonical == nil || !is2xx(o.s.Status) || o.method != "GET" {
			continue
		}
		if inf.base != nil && inf.base.Endpoint(Request{Method: o.method, URL: o.u}) != nil {
			continue
		}
		anchor, id, ok := canonicalID(urlPath(o.page.canonical))
		if !ok || !literalSegment(anchor) || !literalSegment(id) {
			continue
		}
		segs := strings.Split(o.path[1:], "/")
		at := -1
		for i := 1; i < len(segs); i++ {
			if segs[i-1] == anchor && segs[i] == id {
				at = i
				break
			}
		}
		if at < 0 {
			continue
		}
		var cq []string
		for _, p := range parseParams(o.page.canonical.RawQuery, nil) {
			if !slices.Contains(cq, p.Name) && !strings.Contains(p.Name, "*") && p.Name != "" {
				cq = append(cq, p.Name)
			}
		}
		slices.Sort(cq)
		k := idKey{o.site, o.hostname, anchor}
		if _, ok := hits[k]; !ok {
			order = append(order, k)
		}
		hits[k] = append(hits[k], hit{o: o, id: id, suffixed: at < len(segs)-1, canonQuery: cq})
	}
	for _, k := range order {
		list := hits[k]
		urls := map[string]bool{}
		suffixed := false
		var cq []string
		agree := true
		for i, h := range list {
			urls[h.o.path+"?"+h.o.u.RawQuery] = true
			suffixed = suffixed || h.suffixed
			if i == 0 {
				cq = h.canonQuery
			} else if !slices.Equal(cq, h.canonQuery) {
				agree = false
			}
		}
		if !agree || len(urls) < inf.opts.MinAgree {
			continue
		}
		match := "GET /**/" + k.anchor + "/{id}"
		if suffixed {
			match += "/**"
		}
		key := "/" + k.anchor + "/{id}"
		pat, err := compileEndpointPattern(match, key)
		if err != nil {
			continue
		}
		// Every page of this host the pattern matches must say it is /anchor/{id}.
		contradicted := false
		for _, o := range inf.obs {
			if o.hostname != k.host || !inf.usable(o) || o.page == nil || !is2xx(o.s.Status) {
				continue
			}
			caps, ok := pat.match(o.method, o.path)
			if !ok {
				continue
			}
			if o.page.canonical == nil {
				continue
			}
			if a, id, ok := canonicalID(urlPath(o.page.canonical)); !ok || a != k.anchor || id != caps[0] {
				contradicted = true
				break
			}
		}
		if contradicted {
			continue
		}
		keep := cq
		if keep == nil {
			keep = []string{}
		}
		e := &Endpoint{Name: "page-" + safeSiteName(k.anchor), Match: match, Host: k.host, Key: key, KeepParams: keep}
		ids := map[string]bool{}
		for _, h := range list {
			ids[h.id] = true
		}
		ev := fmt.Sprintf("%d recorded URLs of %d pages name their canonical /%s/{id}, e.g. %s -> %s", len(urls), len(ids), k.anchor, cut(list[0].o.s.URL, 60), cut(list[0].o.page.canonical.String(), 60))
		inf.sites[k.site].endpoints = append(inf.sites[k.site].endpoints, rule{endpoint: e, evidence: ev})
	}
}

// literalSegment reports whether s can stand as a literal segment of an endpoint match.
func literalSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "*{} \t") && s != "**"
}

// ---- searches ----

var suggestWords = []string{"autocomplete", "autosuggest", "complete", "completion", "suggest", "suggestions", "suggestion", "typeahead"}

func (inf *inferrer) searches() {
	type sKey struct{ site, host, path string }
	type sHit struct {
		names []string
		first map[string]string
		count map[string]int
	}
	hits := map[sKey]*sHit{}
	var order []sKey
	for _, o := range inf.obs {
		if !inf.usable(o) || o.method != "GET" || !is2xx(o.s.Status) {
			continue
		}
		if o.mt != "text/html" && o.mt != "application/xhtml+xml" && !isJSONType(o.mt) {
			continue
		}
		if inf.base != nil && inf.base.Endpoint(Request{Method: o.method, URL: o.u}) != nil {
			continue
		}
		segs := strings.Split(o.path[1:], "/")
		if slices.ContainsFunc(segs, func(s string) bool { return s != "" && !literalSegment(s) }) {
			continue
		}
		suggest := slices.ContainsFunc(segs, func(s string) bool {
			for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) }) {
				if slices.Contains(suggestWords, w) {
					return true
				}
			}
			return false
		})
		for _, p := range o.params {
			if !slices.Contains(searchParams, p.Name) || (p.Name == "prefix" && !suggest) {
				continue
			}
			if !hasLetter(p.Value) {
				continue
			}
			k := sKey{o.site, o.hostname, o.path}
			h := hits[k]
			if h == nil {
				h = &sHit{first: map[string]string{}, count: map[string]int{}}
				hits[k] = h
				order = append(order, k)
			}
			if _, ok := h.first[p.Name]; !ok {
				h.names = append(h.names, p.Name)
				h.first[p.Name] = p.Value
			}
			h.count[p.Name]++
		}
	}
	for _, k := range order {
		h := hits[k]
		// The most preferred name of the list wins.
		name := ""
		for _, n := range searchParams {
			if _, ok := h.first[n]; ok {
				name = n
				break
			}
		}
		match := "GET " + k.path
		if _, err := compileEndpointPattern(match, ""); err != nil {
			continue
		}
		base := "search"
		if segs := strings.FieldsFunc(k.path, func(r rune) bool { return r == '/' }); len(segs) > 0 {
			base = "search-" + safeSiteName(segs[len(segs)-1])
		}
		e := &Endpoint{Name: base, Match: match, Host: k.host, Kind: KindSearch, TextParam: name}
		ev := fmt.Sprintf("%d recorded searches in %s, e.g. %s=%s", h.count[name], name, name, short(h.first[name]))
		inf.sites[k.site].endpoints = append(inf.sites[k.site].endpoints, rule{endpoint: e, evidence: ev})
	}
}

func hasLetter(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) {
			return true
		}
	}
	return false
}

// ---- output ----

// file renders the site's rules, or returns nil when nothing was inferred.
func (st *siteRules) file() *InferredFile {
	if len(st.drop)+len(st.bodyDrop)+len(st.block)+len(st.exclude)+len(st.endpoints) == 0 {
		return nil
	}
	slices.Sort(st.hosts)
	byValue := func(a, b rule) int { return cmp.Compare(a.value, b.value) }
	for _, l := range [][]rule{st.drop, st.bodyDrop, st.block, st.exclude} {
		slices.SortStableFunc(l, byValue)
	}
	// Endpoints: searches (exact paths) before identity patterns, then by name; names
	// made unique.
	slices.SortStableFunc(st.endpoints, func(a, b rule) int {
		ka, kb := a.endpoint.Kind != KindSearch, b.endpoint.Kind != KindSearch
		if ka != kb {
			if ka {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.endpoint.Name, b.endpoint.Name), cmp.Compare(a.endpoint.Host, b.endpoint.Host), cmp.Compare(a.endpoint.Match, b.endpoint.Match))
	})
	taken := map[string]bool{}
	for _, r := range st.endpoints {
		n := r.endpoint.Name
		for i := 2; taken[n]; i++ {
			n = fmt.Sprintf("%s-%d", r.endpoint.Name, i)
		}
		taken[n] = true
		r.endpoint.Name = n
	}

	doc := &yaml.Node{Kind: yaml.MappingNode}
	doc.HeadComment = "Inferred by pab from this task's recording; rewritten on every import, do not edit.\n" +
		"Corrections go in " + st.name + ".yaml next to this file: hand-written rules win (docs/rules.md)."
	add := func(key string, v *yaml.Node) {
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	list := func(rs []rule) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, r := range rs {
			item := str(r.value)
			item.LineComment = evidence(r.evidence)
			n.Content = append(n.Content, item)
		}
		return n
	}
	add("site", str(st.name))
	hosts := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, h := range st.hosts {
		hosts.Content = append(hosts.Content, str(h))
	}
	add("hosts", hosts)
	if len(st.drop) > 0 {
		add("drop_params", list(st.drop))
	}
	if len(st.bodyDrop) > 0 {
		add("body_drop", list(st.bodyDrop))
	}
	if len(st.block) > 0 {
		add("block", list(st.block))
	}
	if len(st.exclude) > 0 {
		add("exclude", list(st.exclude))
	}
	if len(st.endpoints) > 0 {
		eps := &yaml.Node{Kind: yaml.SequenceNode}
		for _, r := range st.endpoints {
			e := r.endpoint
			m := &yaml.Node{Kind: yaml.MappingNode, HeadComment: evidence(r.evidence)}
			kv := func(k string, v *yaml.Node) {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
			}
			kv("name", str(e.Name))
			kv("match", str(e.Match))
			if e.Host != "" {
				kv("host", str(e.Host))
			}
			if e.Key != "" {
				kv("key", str(e.Key))
			}
			if e.KeepParams != nil {
				kp := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
				for _, p := range e.KeepParams {
					kp.Content = append(kp.Content, str(p))
				}
				kv("keep_params", kp)
			}
			if e.Kind != "" {
				kv("kind", str(e.Kind))
			}
			if e.TextParam != "" {
				kv("text_param", str(e.TextParam))
			}
			eps.Content = append(eps.Content, m)
		}
		add("endpoints", eps)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
		return nil
	}
	enc.Close()
	name := AutoFileName(st.name)
	f, err := ParseFile(name, buf.Bytes())
	if err != nil {
		return nil
	}
	return &InferredFile{Site: st.name, Hosts: slices.Clone(st.hosts), YAML: buf.Bytes(), File: f}
}

// short cuts a value for an evidence comment.
func short(v string) string { return cut(v, 32) }

// cut shortens s to about n bytes, marking the cut with "...".
func cut(v string, n int) string { return textcut.Cut(v, n, "...") }

// evidence makes s a one-line comment: valid UTF-8, no control characters, at most
// maxEvidence bytes.
func evidence(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return ' '
		}
		return r
	}, s)
	return cut(s, maxEvidence)
}

// WriteAutoFiles makes dir (a task's rules directory, created when missing) hold exactly
// the inferred files given: each is written as <Site>.auto.yaml atomically (a temporary
// file in dir, fsync, rename), and every other *.auto.yaml in dir, left by an earlier
// import for a site no longer inferred, is removed. Hand-written files (<site>.yaml) and
// all other names are never touched. Before anything is written every file is checked: a
// site name that is empty, _default, hidden, or holds a path separator, a site given
// twice, or YAML that does not parse with ParseFile is an error and nothing changes.
// Files are written through os.Root, so a symlink leading out of dir is refused.
func WriteAutoFiles(dir string, files []*InferredFile) error {
	names := map[string]bool{}
	for _, f := range files {
		if f == nil {
			return fmt.Errorf("write inferred rules in %s: nil file", dir)
		}
		if !validSiteName(f.Site) {
			return fmt.Errorf("write inferred rules in %s: bad site name %q", dir, f.Site)
		}
		name := AutoFileName(f.Site)
		if names[name] {
			return fmt.Errorf("write inferred rules in %s: site %q given twice", dir, f.Site)
		}
		names[name] = true
		pf, err := ParseFile(name, f.YAML)
		if err != nil {
			return fmt.Errorf("write inferred rules in %s: %w", dir, err)
		}
		if pf.Site != "" && pf.Site != f.Site {
			return fmt.Errorf("write inferred rules in %s: %s: field site is %q, want %q", dir, name, pf.Site, f.Site)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write inferred rules: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write inferred rules: %w", err)
	}
	defer root.Close()
	for _, f := range files {
		if err := writeAtomic(root, dir, AutoFileName(f.Site), f.YAML); err != nil {
			return err
		}
	}
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		d.Close()
		return fmt.Errorf("list %s: %w", dir, err)
	}
	stale := []string{}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".auto.yaml") && !names[n] && !strings.HasPrefix(n, ".") && !e.IsDir() {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	for _, n := range stale {
		if err := root.Remove(n); err != nil {
			d.Close()
			return fmt.Errorf("remove stale inferred rules %s: %w", filepath.Join(dir, n), err)
		}
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// writeAtomic writes data to name inside root: a temporary file, fsync, rename.
func writeAtomic(root *os.Root, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	t, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = t.Write(data)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
