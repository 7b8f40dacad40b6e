package rules

// infer_trackers.go: inferred rules, trackers: hosts and paths of analytics and beacons, to
// block (docs/rules.md, "Inferred rules").

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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
