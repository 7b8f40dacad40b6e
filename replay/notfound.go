package replay

import (
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// NotFoundURL returns the URL that manifest not_found (nf) names for a document missed on
// host ("books.toscrape.com" or "host:port"). A key may be a host, with or without a
// port, compared as rules.HostKey compares hosts (case, Unicode or A-label form and ports
// 80 and 443 do not matter), or the name of a site of rs ("books", a rule file in sites/)
// whose hosts match host. Host keys win over site names; among several matching keys of
// one kind the first in sorted order is taken. ok is false when no key applies.
func NotFoundURL(nf map[string]string, rs *rules.Set, host string) (u string, ok bool) {
	if len(nf) == 0 {
		return "", false
	}
	if u, ok := nf[host]; ok {
		return u, true
	}
	name := hostname(host)
	if u, ok := nf[name]; ok {
		return u, true
	}
	keys := make([]string, 0, len(nf))
	for k := range nf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	hp, hn := rules.HostKey(host), rules.HostKey(name)
	for _, k := range keys {
		if hk := rules.HostKey(k); hk == hp || hk == hn {
			return nf[k], true
		}
	}
	for _, k := range keys {
		if rs.SiteApplies(k, host) {
			return nf[k], true
		}
	}
	return "", false
}

// NotFoundKeyProblems checks the keys of manifest not_found against the recording's
// entries and rules rs: a key that is neither a host of a recorded URL (with or without
// its port, compared as rules.HostKey) nor the name of a site of rs is never used by
// replay, and gives one message naming it. The messages are sorted by key.
func NotFoundKeyProblems(nf map[string]string, entries []recording.Entry, rs *rules.Set) []string {
	if len(nf) == 0 {
		return nil
	}
	hosts := map[string]bool{}
	for i := range entries {
		u, err := url.Parse(entries[i].URL)
		if err != nil || u.Host == "" {
			continue
		}
		hosts[rules.HostKey(u.Host)] = true
		hosts[rules.HostKey(u.Hostname())] = true
	}
	sites := rs.SiteNames()
	var probs []string
	for _, k := range slices.Sorted(maps.Keys(nf)) {
		if hosts[rules.HostKey(k)] || slices.Contains(sites, k) {
			continue
		}
		probs = append(probs, fmt.Sprintf("not_found key %q is neither a host of the recording nor a site of the rules; replay never serves %s", k, nf[k]))
	}
	return probs
}
