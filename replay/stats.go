package replay

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/pab-dev/pab/warc"
)

// Counts are request counts by source and by type, as served by http://rr.control/stats:
//
//	{"total":12,"by_source":{"exact":9,"search":1,"miss":2},"by_type":{"document":3,"image":9}}
type Counts struct {
	Total    int            `json:"total"`
	BySource map[string]int `json:"by_source"`
	ByType   map[string]int `json:"by_type"`
}

func newCounts() Counts {
	return Counts{BySource: map[string]int{}, ByType: map[string]int{}}
}

func (c *Counts) add(source, typ string) {
	c.Total++
	c.BySource[source]++
	c.ByType[typ]++
}

// counter is Counts guarded for concurrent use by the proxy.
type counter struct {
	mu sync.Mutex
	c  Counts
}

func (k *counter) add(source, typ string) {
	k.mu.Lock()
	k.c.add(source, typ)
	k.mu.Unlock()
}

func (k *counter) snapshot() Counts {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := newCounts()
	out.Total = k.c.Total
	for s, n := range k.c.BySource {
		out.BySource[s] = n
	}
	for t, n := range k.c.ByType {
		out.ByType[t] = n
	}
	return out
}

// Stats summarizes a replay log (pab stats).
type Stats struct {
	Counts
	// ByTypeSource counts requests by type, then by source.
	ByTypeSource map[string]map[string]int `json:"by_type_source"`
	// TopMissed lists missed keys, most frequent first (ties by first appearance).
	TopMissed []KeyCount `json:"top_missed"`
	// Spares are recorded exchanges no request used, in recording order; filled by the
	// caller with Spares when the bundle is at hand.
	Spares []warc.Entry `json:"spares,omitempty"`
}

// KeyCount is one missed key: how often it was asked for, and the first URL that asked.
type KeyCount struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
	URL   string `json:"url"`
	Type  string `json:"type"`
}

// Summarize counts the lines of a replay log by source and type and ranks the missed keys.
// Lines are taken in order; the result does not depend on map iteration order.
func Summarize(lines []LogLine) Stats {
	st := Stats{Counts: newCounts(), ByTypeSource: map[string]map[string]int{}}
	missIdx := map[string]int{}
	for _, l := range lines {
		st.add(l.Source, l.Type)
		m := st.ByTypeSource[l.Type]
		if m == nil {
			m = map[string]int{}
			st.ByTypeSource[l.Type] = m
		}
		m[l.Source]++
		if l.Source != SourceMiss {
			continue
		}
		key := l.Key
		if key == "" {
			key = l.Method + " " + l.URL
		}
		if i, ok := missIdx[key]; ok {
			st.TopMissed[i].Count++
			continue
		}
		missIdx[key] = len(st.TopMissed)
		st.TopMissed = append(st.TopMissed, KeyCount{Key: key, Count: 1, URL: l.URL, Type: l.Type})
	}
	sort.SliceStable(st.TopMissed, func(i, j int) bool { return st.TopMissed[i].Count > st.TopMissed[j].Count })
	return st
}

// Spares returns the recorded exchanges of idx (excluded URLs left out) that no log line
// names in its "entry" field, in recording order.
func Spares(idx *Index, lines []LogLine) []warc.Entry {
	used := make(map[string]bool, len(lines))
	for _, l := range lines {
		if l.Entry != "" {
			used[l.Entry] = true
		}
	}
	var out []warc.Entry
	for _, ie := range idx.entries {
		if !used[ie.e.ID] {
			out = append(out, *ie.e)
		}
	}
	return out
}

// sourceOrder is the order sources are printed in.
var sourceOrder = []string{SourceExact, SourceSearch, SourcePromo, SourceFuzzy, SourceBlocked, SourcePreflight, SourceMiss}

// hitSources are the sources that answer with a recording.
var hitSources = []string{SourceExact, SourceSearch, SourcePromo, SourceFuzzy}

// Print writes a human-readable summary: shares by source, a table by type, the top missed
// keys and spares (at most top of each).
func (st Stats) Print(w io.Writer, top int) {
	fmt.Fprintf(w, "requests: %d\n", st.Total)
	if st.Total == 0 {
		return
	}
	pct := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	}
	sources := orderedKeys(st.BySource, sourceOrder)
	for _, s := range sources {
		fmt.Fprintf(w, "  %-10s %6d  %6s\n", s, st.BySource[s], pct(st.BySource[s], st.Total))
	}
	hits := 0
	for _, s := range hitSources {
		hits += st.BySource[s]
	}
	fmt.Fprintf(w, "answered from the recording (exact, search, promo, fuzzy): %d, %s\n", hits, pct(hits, st.Total))
	fmt.Fprintf(w, "\nby type (%% of the type's requests):\n  %-9s %6s", "type", "total")
	for _, s := range sources {
		fmt.Fprintf(w, " %9s", s)
	}
	fmt.Fprintln(w)
	for _, t := range orderedKeys(st.ByType, nil) {
		n := st.ByType[t]
		fmt.Fprintf(w, "  %-9s %6d", t, n)
		for _, s := range sources {
			fmt.Fprintf(w, " %9s", pct(st.ByTypeSource[t][s], n))
		}
		fmt.Fprintln(w)
	}
	if len(st.TopMissed) > 0 {
		fmt.Fprintf(w, "\ntop missed keys (%d distinct):\n", len(st.TopMissed))
		for i, m := range st.TopMissed {
			if i == top {
				fmt.Fprintf(w, "  ... and %d more\n", len(st.TopMissed)-top)
				break
			}
			fmt.Fprintf(w, "  %5d  %-8s %s\n", m.Count, m.Type, m.Key)
		}
	}
	if st.Spares != nil {
		fmt.Fprintf(w, "\nspares (recorded, never requested): %d\n", len(st.Spares))
		for i, e := range st.Spares {
			if i == top {
				fmt.Fprintf(w, "  ... and %d more\n", len(st.Spares)-top)
				break
			}
			fmt.Fprintf(w, "  %s  %s %s (%d)\n", e.ID, e.Method, e.URL, e.Status)
		}
	}
}

// orderedKeys returns the keys of m: first those in prefer (in that order), then the rest
// sorted.
func orderedKeys(m map[string]int, prefer []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range prefer {
		if _, ok := m[k]; ok {
			out = append(out, k)
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
