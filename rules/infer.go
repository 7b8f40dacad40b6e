package rules

// infer.go: site rules inferred from a recording (docs/rules.md, "Inferred rules"). Infer
// reads recorded exchanges (never WARC files) and proposes, per site, the rules a person
// would otherwise write by hand: bot-check pages to exclude, volatile parameters to drop,
// page identity from <link rel="canonical">, search endpoints and trackers to block.

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/httpx"
	"golang.org/x/net/publicsuffix"
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
	o.mt = httpx.MediaType(s.ContentType)
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
