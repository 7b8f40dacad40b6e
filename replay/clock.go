package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

// MaxClockDocument bounds the HTML documents the page clock is injected into, in bytes:
// a larger document is served untouched and its log line says so.
const MaxClockDocument = 32 << 20

// Clock is the page clock: a small script put at the top of every replayed HTML document
// that shifts the page's wall clock to the recording's time (manifest captured_from) and
// lets it run on from there at its real speed (docs/replay.md "The page clock", per API):
//
//   - Date.now(), new Date() and Date() give captured_from plus the time since the script
//     ran; new Date(x) with arguments, Date.parse, Date.UTC and Date.prototype are unchanged.
//   - performance.timeOrigin (High Resolution Time, W3C hr-time-3 section 5: the epoch ms
//     at which the page's time began), performance.toJSON().timeOrigin and the epoch
//     times of performance.timing (Navigation Timing Level 1; 0 stays 0) are moved by the
//     same offset, so timeOrigin + performance.now() is Date.now(). performance.now()
//     itself, event time stamps and timers (setTimeout, setInterval,
//     requestAnimationFrame) are relative and left alone: they run at the real speed.
//   - Cookie expiry dates a page writes (document.cookie, cookieStore.set) are moved back
//     by the same offset, so a cookie lives as long as it did on the recorded day (see
//     cookieShift).
//
// With deterministic random, Math.random, crypto.getRandomValues and crypto.randomUUID
// also give the same values on every load of a page (one mulberry32 generator seeded from
// the page URL; a UUID is 16 of its bytes with the version 4 and variant bits of RFC 9562
// section 5.4).
//
// The script text depends only on the recording's time and the random option, so its
// sha256 (the CSP hash source, CSP3 section 2.3.1) is the same for every page.
type Clock struct {
	script string // the JavaScript between <script> and </script>
	hash   string // "'sha256-BASE64'" of script
}

// NewClock makes the page clock for a recording captured at capturedFrom.
func NewClock(capturedFrom time.Time, deterministicRandom bool) *Clock {
	var sb strings.Builder
	sb.WriteString("(function(){\"use strict\";var D=Date,off=")
	sb.WriteString(strconv.FormatInt(capturedFrom.UnixMilli(), 10))
	sb.WriteString(`-D.now();` +
		`var P=function Date(y,m,d,h,i,s,ms){` +
		`if(!new.target){return new D(D.now()+off).toString();}` +
		`return arguments.length?Reflect.construct(D,arguments,new.target):Reflect.construct(D,[D.now()+off],new.target);};` +
		`P.prototype=D.prototype;P.now=function now(){return D.now()+off;};P.parse=D.parse;P.UTC=D.UTC;` +
		`Object.defineProperty(D.prototype,"constructor",{value:P,writable:true,configurable:true});` +
		`window.Date=P;`)
	sb.WriteString(perfShift)
	sb.WriteString(cookieShift)
	if deterministicRandom {
		sb.WriteString(`var h=2166136261,u=String(location.href);` +
			`for(var k=0;k<u.length;k++){h=Math.imul(h^u.charCodeAt(k),16777619);}` +
			`var a=h>>>0;function r(){a=(a+1831565813)|0;var t=Math.imul(a^(a>>>15),1|a);` +
			`t=(t+Math.imul(t^(t>>>7),61|t))^t;return((t^(t>>>14))>>>0)/4294967296;}` +
			`Math.random=function random(){return r();};` +
			`if(window.crypto&&crypto.getRandomValues){var g=crypto.getRandomValues;` +
			`crypto.getRandomValues=function getRandomValues(v){g.call(crypto,v);` +
			`var b=new Uint8Array(v.buffer,v.byteOffset,v.byteLength);` +
			`for(var j=0;j<b.length;j++){b[j]=(r()*256)|0;}return v;};}` +
			`if(window.crypto&&crypto.randomUUID){crypto.randomUUID=function randomUUID(){` +
			`var s="";for(var j=0;j<16;j++){var x=(r()*256)|0;if(j===6){x=(x&15)|64;}else if(j===8){x=(x&63)|128;}` +
			`s+=(x+256).toString(16).slice(1);if(j===3||j===5||j===7||j===9){s+="-";}}return s;};}`)
	}
	sb.WriteString("})();")
	sum := sha256.Sum256([]byte(sb.String()))
	return &Clock{script: sb.String(), hash: "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"}
}

// perfShift is the part of the clock script that moves the High Resolution Time origin and
// the Navigation Timing Level 1 epoch times by the clock's offset (off, captured_from minus
// the real time when the script ran; D is the real Date): performance.timeOrigin's getter,
// the timeOrigin of performance.toJSON(), and every non-zero time of performance.timing
// (and of its toJSON). performance.now() is relative to timeOrigin and is kept.
const perfShift = `if(window.Performance){var Pp=Performance.prototype,` +
	`tod=Object.getOwnPropertyDescriptor(Pp,"timeOrigin");` +
	`if(tod&&tod.get&&tod.configurable){Object.defineProperty(Pp,"timeOrigin",{get:function timeOrigin(){return tod.get.call(this)+off;},` +
	`enumerable:tod.enumerable,configurable:true});}` +
	`var pj=Pp.toJSON;if(typeof pj==="function"){Pp.toJSON=function toJSON(){var o=pj.call(this);` +
	`if(o&&typeof o.timeOrigin==="number"){o.timeOrigin+=off;}return o;};}}` +
	`if(window.PerformanceTiming){var Tp=PerformanceTiming.prototype;` +
	`Object.getOwnPropertyNames(Tp).forEach(function(n){var td=Object.getOwnPropertyDescriptor(Tp,n);` +
	`if(td&&td.get&&td.configurable){Object.defineProperty(Tp,n,{get:function(){var t=td.get.call(this);return t?t+off:t;},` +
	`enumerable:td.enumerable,configurable:true});}});` +
	`var tj=Tp.toJSON;if(typeof tj==="function"){Tp.toJSON=function toJSON(){var o=tj.call(this);` +
	`for(var k in o){if(typeof o[k]==="number"&&o[k]){o[k]+=off;}}return o;};}}`

// cookieShift is the part of the clock script that keeps cookies alive as long as on the
// recorded day. A page that sets a cookie to expire a year after its (shifted) today would
// otherwise set an expiry in the browser's real past, and the cookie would vanish at once.
// So an expires attribute written through document.cookie, and the expires member (ms since
// the epoch) of an object given to cookieStore.set, is moved by the clock's offset: from
// the recorded day to the real one. A date that Date.parse cannot read is left as written;
// max-age is relative and left alone. It runs inside the clock's function, where D is the
// real Date and off is captured_from minus the real time when the page started.
const cookieShift = `var Dp=D.parse,cd=Object.getOwnPropertyDescriptor(Document.prototype,"cookie");` +
	`if(cd&&cd.set&&cd.configurable){Object.defineProperty(Document.prototype,"cookie",{get:cd.get,` +
	`set:function cookie(v){return cd.set.call(this,String(v).replace(/(;[ \t]*expires[ \t]*=[ \t]*)([^;]*)/gi,` +
	`function(a,p,d){var t=Dp(d);return t===t?p+new D(t-off).toUTCString():a;}));},` +
	`enumerable:cd.enumerable,configurable:true});}` +
	`if(window.CookieStore&&CookieStore.prototype.set){var cs=CookieStore.prototype.set;` +
	`CookieStore.prototype.set=function set(a,b){` +
	`if(a!==null&&typeof a==="object"&&typeof a.expires==="number"){a=Object.assign({},a,{expires:a.expires-off});}` +
	`return arguments.length>1?cs.call(this,a,b):cs.call(this,a);};}`

// Script returns the clock's JavaScript (the text between <script> and </script>).
func (c *Clock) Script() string { return c.script }

// Hash returns the CSP hash source of the script, "'sha256-BASE64'" (CSP3 section 2.3.1).
func (c *Clock) Hash() string { return c.hash }

// WantsClock reports whether replay puts the page clock into a recorded answer of this
// status and recorded header fields (see wantsClock), when its payload is at most
// MaxClockDocument bytes: pab check --crawl computes from it what a browser should receive.
func WantsClock(status int, h http.Header) bool { return wantsClock(status, h) }

// wantsClock reports whether a recorded answer gets the clock: a response of any status
// that carries a body (not 1xx, 204, 205 or 304), so the site's own 404 and error pages
// too, served as text/html, whose stored payload carries no Content-Encoding.
func wantsClock(status int, h http.Header) bool {
	if status < 200 || status == http.StatusNoContent || status == http.StatusResetContent || status == http.StatusNotModified {
		return false
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != "text/html" {
		return false
	}
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// Inject puts the clock script into the HTML document body, served with header h (which it
// may change: Content-Security-Policy fields, Content-Type charset). It returns the new
// body and a note for the log ("" when all went well). A body that is not HTML (its first
// byte after white space and a byte order mark is not '<') is returned unchanged with no
// note.
//
// The script goes right after the first real <head> start tag, else before the first
// element; a <head> inside a comment, a script or other raw text is never taken, as the
// tokenizer of golang.org/x/net/html reads them. Every other byte is kept, except the
// content attribute of a <meta http-equiv="Content-Security-Policy"> in the head (see
// addCSPHash). When the Content-Type field names no charset and a <meta> of the head that
// ends within the first 1024 bytes declares one, that charset is added to Content-Type, so
// that moving the <meta> further from the start cannot change how the page is decoded.
func (c *Clock) Inject(h http.Header, body []byte) ([]byte, string) {
	if !looksLikeHTML(body) {
		return body, ""
	}
	var notes []string
	at, metas, label := headScan(body)
	tag := "<script>" + c.script + "</script>"
	out := make([]byte, 0, len(body)+len(tag)+64*len(metas))
	out = append(out, body[:at]...)
	out = append(out, tag...)
	pos := at
	for _, m := range metas {
		policy, changed, err := addCSPHash(m.policy, c.hash)
		if err != nil {
			notes = append(notes, "clock: meta CSP left as is: "+err.Error())
			continue
		}
		if !changed {
			continue
		}
		out = append(out, body[pos:m.start]...)
		out = append(out, metaTag(m.attrs, policy)...)
		pos = m.end
	}
	out = append(out, body[pos:]...)

	vs := h.Values("Content-Security-Policy")
	for i, v := range vs {
		policy, changed, err := addCSPHash(v, c.hash)
		if err != nil {
			notes = append(notes, "clock: Content-Security-Policy left as is: "+err.Error())
			continue
		}
		if changed {
			vs[i] = policy
		}
	}
	if ct := h.Get("Content-Type"); ct != "" && label != "" {
		if _, params, err := mime.ParseMediaType(ct); err == nil && params["charset"] == "" {
			if _, name := charset.Lookup(label); name != "" {
				if strings.HasPrefix(name, "utf-16") {
					name = "utf-8" // as the HTML prescan does (WHATWG HTML 13.2.3.2)
				}
				h.Set("Content-Type", ct+"; charset="+name)
			}
		}
	}
	return out, strings.Join(notes, "; ")
}

// looksLikeHTML reports whether the first byte of body after a UTF-8 byte order mark and
// white space is '<': a JSON or JSONP body served as text/html is not.
func looksLikeHTML(body []byte) bool {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	body = bytes.TrimLeft(body, " \t\r\n\f")
	return len(body) > 0 && body[0] == '<'
}

// cspMeta is a <meta http-equiv="Content-Security-Policy"> found in the head.
type cspMeta struct {
	start, end int // byte range of the tag in the body
	attrs      []html.Attribute
	policy     string
}

// charsetPrescan is how far into a document browsers look for a <meta> that declares its
// character encoding (WHATWG HTML 13.2.3.2, "prescan a byte stream").
const charsetPrescan = 1024

// headScan tokenizes body and returns where the script goes, the CSP meta tags of the head
// and the charset label declared by a <meta> of the head that ends within the first
// charsetPrescan bytes ("" if none). The script goes after the first <head> start tag when no other element came first
// (only a doctype, comments, white space and <html>), else before the first element other
// than <html>; with no such element, at the end.
func headScan(body []byte) (int, []cspMeta, string) {
	z := html.NewTokenizer(bytes.NewReader(body))
	pos := 0
	at := -1
	var metas []cspMeta
	label := ""
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		start := pos
		pos += len(z.Raw())
		if tt == html.EndTagToken && at >= 0 {
			if name, _ := z.TagName(); string(name) == "head" {
				break
			}
			continue
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		t := z.Token()
		if at < 0 {
			switch t.Data {
			case "html":
				continue
			case "head":
				at = pos
				continue
			}
			at = start
		}
		// The head ends at the first element that cannot stand in it (a tag like meta or
		// title that comes first opens the head implicitly).
		if !headElement(t.Data) {
			break
		}
		if l := charsetOf(t); l != "" && label == "" && pos <= charsetPrescan {
			label = l
		}
		if m, ok := cspMetaOf(t); ok {
			m.start, m.end = start, pos
			metas = append(metas, m)
		}
	}
	if at < 0 {
		at = len(body)
	}
	return at, metas, label
}

// charsetOf returns the encoding label a <meta charset> or <meta http-equiv="Content-Type"
// content="...; charset=X"> declares, "" for any other tag.
func charsetOf(t html.Token) string {
	if t.Data != "meta" {
		return ""
	}
	var equiv, content string
	for _, a := range t.Attr {
		switch a.Key {
		case "charset":
			return strings.TrimSpace(a.Val)
		case "http-equiv":
			equiv = a.Val
		case "content":
			content = a.Val
		}
	}
	if !strings.EqualFold(strings.TrimSpace(equiv), "content-type") {
		return ""
	}
	if _, params, err := mime.ParseMediaType(content); err == nil {
		return params["charset"]
	}
	return ""
}

// cspMetaOf returns the policy of t when it is a <meta http-equiv="Content-Security-Policy">
// with a content attribute.
func cspMetaOf(t html.Token) (cspMeta, bool) {
	if t.Data != "meta" {
		return cspMeta{}, false
	}
	var equiv, content string
	hasContent := false
	for _, a := range t.Attr {
		switch a.Key {
		case "http-equiv":
			equiv = a.Val
		case "content":
			if !hasContent {
				content, hasContent = a.Val, true
			}
		}
	}
	if !hasContent || !strings.EqualFold(strings.TrimSpace(equiv), "content-security-policy") {
		return cspMeta{}, false
	}
	return cspMeta{attrs: t.Attr, policy: content}, true
}

// headElement reports whether a start tag named name may stand in the head.
func headElement(name string) bool {
	switch name {
	case "meta", "title", "link", "style", "script", "noscript", "base", "template":
		return true
	}
	return false
}

// metaTag writes a <meta> tag with attrs, the first content attribute set to policy.
func metaTag(attrs []html.Attribute, policy string) string {
	var sb strings.Builder
	sb.WriteString("<meta")
	done := false
	for _, a := range attrs {
		v := a.Val
		if a.Key == "content" && !done {
			v, done = policy, true
		}
		sb.WriteString(" " + a.Key + `="` + html.EscapeString(v) + `"`)
	}
	sb.WriteString(">")
	return sb.String()
}

// errMalformedCSP: a policy this package does not rewrite.
var errMalformedCSP = errors.New("malformed policy")

// addCSPHash adds the hash source hash to the directive that governs inline <script>
// elements in every policy of a Content-Security-Policy value (policies separated by ',',
// directives by ';', CSP3 section 2.2): script-src-elem, else script-src, else
// default-src; a policy with none of them does not restrict scripts and is kept. A
// 'none' in that directive is replaced by the hash. When the directive allows inline
// scripts with 'unsafe-inline' and has no nonce or hash (which would already disable
// 'unsafe-inline'), it is kept: a hash would disable 'unsafe-inline' for the page's own
// inline scripts, and the clock runs anyway. 'strict-dynamic' and nonces do not stop a
// hash-listed script, so the hash is added to such policies too.
//
// changed says whether value was rewritten. A directive name with characters other than
// ASCII letters, digits and '-', or a value with control or non-ASCII characters, is an
// error naming the directive; the value is then to be kept as is.
func addCSPHash(value, hash string) (string, bool, error) {
	policies := strings.Split(value, ",")
	changed := false
	for pi, policy := range policies {
		dirs := strings.Split(policy, ";")
		best, bestRank := -1, 99
		seen := map[string]bool{}
		for di, d := range dirs {
			fields := strings.Fields(d)
			if len(fields) == 0 {
				continue
			}
			name := strings.ToLower(fields[0])
			if !validDirective(name) {
				return value, false, fmt.Errorf("%w: directive %q", errMalformedCSP, fields[0])
			}
			for _, f := range fields[1:] {
				for _, r := range f {
					if r < 0x21 || r > 0x7e {
						return value, false, fmt.Errorf("%w: directive %s has a character %q", errMalformedCSP, name, r)
					}
				}
			}
			if seen[name] {
				continue // a repeated directive is ignored (CSP3 section 2.2.1)
			}
			seen[name] = true
			if r, ok := scriptDirectives[name]; ok && r < bestRank {
				best, bestRank = di, r
			}
		}
		if best < 0 {
			continue
		}
		fields := strings.Fields(dirs[best])
		inline, keyed, has := false, false, false
		kept := fields[:1:1]
		for _, f := range fields[1:] {
			lf := strings.ToLower(f)
			switch {
			case f == hash:
				has = true
			case lf == "'unsafe-inline'":
				inline = true
			case strings.HasPrefix(lf, "'nonce-") || strings.HasPrefix(lf, "'sha256-") ||
				strings.HasPrefix(lf, "'sha384-") || strings.HasPrefix(lf, "'sha512-"):
				keyed = true
			}
			if lf != "'none'" {
				kept = append(kept, f)
			}
		}
		if has || (inline && !keyed) {
			continue
		}
		lead := dirs[best][:len(dirs[best])-len(strings.TrimLeft(dirs[best], " \t"))]
		dirs[best] = lead + strings.Join(append(kept, hash), " ")
		policies[pi] = strings.Join(dirs, ";")
		changed = true
	}
	if !changed {
		return value, false, nil
	}
	return strings.Join(policies, ","), true, nil
}

// scriptDirectives rank the directives that govern inline <script> elements, first the
// one that wins (CSP3 section 6.8.2, effective directive fallback list).
var scriptDirectives = map[string]int{"script-src-elem": 0, "script-src": 1, "default-src": 2}

// validDirective reports whether name is a CSP directive name (ALPHA / DIGIT / "-").
func validDirective(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return name != ""
}

// readClockBody reads a body of size bytes for injection; ok is false (and nothing is
// read: the body is to be streamed as is) when size exceeds limit.
func readClockBody(r io.Reader, size, limit int64) ([]byte, bool, error) {
	if size > limit {
		return nil, false, nil
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, false, err
	}
	return buf, true, nil
}
