package rules

// infer_botcheck.go: inferred rules, bot-check pages: the challenge and block pages of bot
// defences, to exclude from replay (docs/rules.md, "Inferred rules").

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

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
