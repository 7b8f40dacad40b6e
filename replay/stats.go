package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/pab-dev/pab/recording"

	"github.com/pab-dev/pab/internal/mapx"
	"github.com/pab-dev/pab/internal/textcut"
)

// Counts are request counts by source and by type, as served by http://rr.control/stats:
//
//	{"total":12,"by_source":{"exact":9,"search":1,"miss":2},"by_type":{"document":3,"image":9}}
type Counts struct {
	Total    int            `json:"total"`
	BySource map[Source]int `json:"by_source"`
	ByType   map[string]int `json:"by_type"`
}

func newCounts() Counts {
	return Counts{BySource: map[Source]int{}, ByType: map[string]int{}}
}

func (c *Counts) add(source Source, typ string) {
	c.Total++
	c.BySource[source]++
	c.ByType[typ]++
}

// counter is Counts guarded for concurrent use by the proxy: by the lock of its tail
// (Server.emit counts, keeps and queues a line under it), which mu points to. The sources
// and types the proxy answers with are counted in arrays (one add per request: no map
// hashing), any other in other.
type counter struct {
	mu       *sync.Mutex
	total    int
	bySource [len(countedSources)]int
	byType   [len(countedTypes)]int
	other    Counts // sources and types not in countedSources and countedTypes
}

// countedSources and countedTypes are the sources and types counter counts in arrays, in
// the order of their indexes (sourceIndex, typeIndex).
var (
	countedSources = [...]Source{SourceExact, SourceSearch, SourcePromo, SourceFuzzy, SourceBlocked, SourcePreflight, SourceMiss, SourceRefused}
	countedTypes   = [...]string{TypeDocument, TypeImage, TypeFont, TypeStyle, TypeScript, TypeAPI, TypeMedia, TypeOther, TypeTracker}
)

// sourceIndex is s's index in countedSources, or -1.
func sourceIndex(s Source) int {
	switch s {
	case SourceExact:
		return 0
	case SourceSearch:
		return 1
	case SourcePromo:
		return 2
	case SourceFuzzy:
		return 3
	case SourceBlocked:
		return 4
	case SourcePreflight:
		return 5
	case SourceMiss:
		return 6
	case SourceRefused:
		return 7
	}
	return -1
}

// typeIndex is t's index in countedTypes, or -1.
func typeIndex(t string) int {
	switch t {
	case TypeDocument:
		return 0
	case TypeImage:
		return 1
	case TypeFont:
		return 2
	case TypeStyle:
		return 3
	case TypeScript:
		return 4
	case TypeAPI:
		return 5
	case TypeMedia:
		return 6
	case TypeOther:
		return 7
	case TypeTracker:
		return 8
	}
	return -1
}

// addLocked counts one answer; k.mu is held.
func (k *counter) addLocked(source Source, typ string) {
	k.total++
	if i := sourceIndex(source); i >= 0 {
		k.bySource[i]++
	} else {
		k.other.BySource[source]++
	}
	if i := typeIndex(typ); i >= 0 {
		k.byType[i]++
	} else {
		k.other.ByType[typ]++
	}
}

// snapshot returns the counts so far as Counts: a source or type is in its map once
// counted.
func (k *counter) snapshot() Counts {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := newCounts()
	out.Total = k.total
	for i, n := range k.bySource {
		if n > 0 {
			out.BySource[countedSources[i]] = n
		}
	}
	for i, n := range k.byType {
		if n > 0 {
			out.ByType[countedTypes[i]] = n
		}
	}
	for s, n := range k.other.BySource {
		out.BySource[s] = n
	}
	for t, n := range k.other.ByType {
		out.ByType[t] = n
	}
	return out
}

// Stats summarizes a replay log (pab stats).
type Stats struct {
	Counts
	// ByTypeSource counts requests by type, then by source.
	ByTypeSource map[string]map[Source]int `json:"by_type_source"`
	// TopMissed lists missed keys, most frequent first (ties by first appearance): at most
	// MaxMissedKeys of them, the first distinct keys met.
	TopMissed []KeyCount `json:"top_missed"`
	// MissedOther counts the misses whose key was not among the MaxMissedKeys first
	// distinct missed keys (they are counted in Total and BySource, not ranked).
	MissedOther int `json:"missed_other,omitempty"`
	// NotInRecording counts the misses on a recorded exchange whose body is not in the
	// recording: a revisit without its original, or a HAR response whose body the capture
	// left out ("body not captured").
	NotInRecording int `json:"not_in_recording,omitempty"`
	// Truncated counts the lines whose fields replay cut to fit MaxLogLine.
	Truncated int `json:"truncated,omitempty"`
	// Unreadable counts the lines that could not be read (skipped); FirstUnreadable is the
	// first of them, "line N: problem".
	Unreadable      int    `json:"unreadable,omitempty"`
	FirstUnreadable string `json:"first_unreadable,omitempty"`
	// Spares are recorded exchanges no request used, in recording order; filled by
	// Summarizer.Stats when it was given an index (or by the caller with Spares).
	Spares []recording.Entry `json:"spares,omitempty"`
}

// KeyCount is one missed key: how often it was asked for, and the first URL that asked.
// Key and URL are cut to 1 KiB (ending in "…" when cut).
type KeyCount struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
	URL   string `json:"url"`
	Type  string `json:"type"`
}

// Bounds of a Summarizer, so that pab stats runs in memory independent of the log's length.
const (
	// MaxMissedKeys is how many distinct missed keys are counted one by one.
	MaxMissedKeys = 10000
	// MaxStatsLabels is how many distinct types, and distinct sources, are counted one by
	// one; further ones (only a log not written by replay has them) count as "(other)".
	MaxStatsLabels = 64

	maxStatsText  = 1 << 10 // a missed key or URL as kept
	maxStatsLabel = 64      // a type or source as kept
	otherLabel    = "(other)"
)

// Summarizer builds Stats from log lines given one at a time (Add), in memory bounded by
// MaxMissedKeys, MaxStatsLabels and the index's size, not by the number of lines (pab stats
// on a hostile 1 GB log of 1 MiB and 30 KiB lines: 92 MB). Lines are taken in order; the
// result does not depend on map iteration order.
type Summarizer struct {
	st      Stats
	missIdx map[string]int  // missed key identity → position in st.TopMissed
	idx     *Index          // nil: no spares
	used    map[string]bool // entry ids of idx named by a line
}

// NewSummarizer returns an empty Summarizer. With idx, Stats also lists the spares: the
// recorded exchanges of idx that no line names in "entry".
func NewSummarizer(idx *Index) *Summarizer {
	s := &Summarizer{st: Stats{Counts: newCounts(), ByTypeSource: map[string]map[Source]int{}}, missIdx: map[string]int{}, idx: idx}
	if idx != nil {
		s.used = make(map[string]bool, idx.Len())
		for p := range idx.Len() {
			s.used[idx.entry(p).e.ID] = false
		}
	}
	return s
}

// Add counts one log line.
func (s *Summarizer) Add(l *LogLine) {
	st := &s.st
	src := boundedLabel(st.BySource, l.Source)
	typ := boundedLabel(st.ByType, l.Type)
	st.add(src, typ)
	m := st.ByTypeSource[typ]
	if m == nil {
		m = map[Source]int{}
		st.ByTypeSource[typ] = m
	}
	m[src]++
	if l.Truncated {
		st.Truncated++
	}
	if s.used != nil && l.Entry != "" {
		if _, ok := s.used[l.Entry]; ok {
			s.used[l.Entry] = true
		}
	}
	if l.Source != SourceMiss {
		return
	}
	if strings.HasPrefix(l.Note, noteUnresolved) {
		st.NotInRecording++
	}
	key := l.Key
	if key == "" {
		key = l.Method + " " + l.URL
	}
	id := textID(key)
	if i, ok := s.missIdx[id]; ok {
		st.TopMissed[i].Count++
		return
	}
	if len(st.TopMissed) >= MaxMissedKeys {
		st.MissedOther++
		return
	}
	s.missIdx[id] = len(st.TopMissed)
	st.TopMissed = append(st.TopMissed, KeyCount{Key: cutText(key, maxStatsText), Count: 1, URL: cutText(l.URL, maxStatsText), Type: typ})
}

// Unreadable counts a line that could not be read: its number and why.
func (s *Summarizer) Unreadable(line int, problem string) {
	if s.st.Unreadable == 0 {
		s.st.FirstUnreadable = fmt.Sprintf("line %d: %s", line, problem)
	}
	s.st.Unreadable++
}

// Stats returns the summary of the lines added so far, missed keys ranked.
func (s *Summarizer) Stats() Stats {
	st := s.st
	st.TopMissed = append([]KeyCount(nil), s.st.TopMissed...)
	sort.SliceStable(st.TopMissed, func(i, j int) bool { return st.TopMissed[i].Count > st.TopMissed[j].Count })
	if s.idx != nil {
		st.Spares = nil
		for p := range s.idx.Len() {
			if ie := s.idx.entry(p); !s.used[ie.e.ID] {
				st.Spares = append(st.Spares, *ie.e)
			}
		}
	}
	return st
}

// SummarizeLog reads a replay log from r once, line by line (LogScanner), and summarizes
// it with a Summarizer (spares too when idx is not nil). Unreadable lines are counted in
// Stats.Unreadable and skipped. The error is a read error of r only, naming name and the
// line.
func SummarizeLog(r io.Reader, name string, idx *Index) (Stats, error) {
	s := NewSummarizer(idx)
	sc := NewLogScanner(r)
	for sc.Scan() {
		if l := sc.Log(); l != nil {
			s.Add(l)
		} else {
			s.Unreadable(sc.Line(), sc.Problem())
		}
	}
	if err := sc.Err(); err != nil {
		return Stats{}, fmt.Errorf("read %s line %d: %w", name, sc.Line()+1, err)
	}
	return s.Stats(), nil
}

// Summarize counts the lines of a replay log by source and type and ranks the missed keys
// (a Summarizer over lines, without spares).
func Summarize(lines []LogLine) Stats {
	s := NewSummarizer(nil)
	for i := range lines {
		s.Add(&lines[i])
	}
	return s.Stats()
}

// boundedLabel returns v (cut to maxStatsLabel bytes) as a key of m, or "(other)" when m has
// MaxStatsLabels keys already and v is not one of them.
func boundedLabel[K ~string](m map[K]int, v K) K {
	v = K(cutText(string(v), maxStatsLabel))
	if _, ok := m[v]; ok || len(m) < MaxStatsLabels {
		return v
	}
	return otherLabel
}

// cutText cuts s to at most n bytes at a character boundary, ending in "…" when cut.
func cutText(s string, n int) string { return textcut.Fit(s, n, "…") }

// textID is a string that stands for s in a map, in at most maxStatsText+1 bytes: "k" and s
// when s is short, else "h" and the hex SHA-256 of s.
func textID(s string) string {
	if len(s) <= maxStatsText {
		return "k" + s
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:])
}

// Spares returns the recorded exchanges of idx (excluded URLs left out) that no log line
// names in its "entry" field, in recording order.
func Spares(idx *Index, lines []LogLine) []recording.Entry {
	used := make(map[string]bool, len(lines))
	for _, l := range lines {
		if l.Entry != "" {
			used[l.Entry] = true
		}
	}
	var out []recording.Entry
	for p := range idx.Len() {
		if ie := idx.entry(p); !used[ie.e.ID] {
			out = append(out, *ie.e)
		}
	}
	return out
}

// sourceOrder is the order sources are printed in.
var sourceOrder = []Source{SourceExact, SourceSearch, SourcePromo, SourceFuzzy, SourceBlocked, SourcePreflight, SourceMiss, SourceRefused}

// hitSources are the sources that answer with a recording.
var hitSources = []Source{SourceExact, SourceSearch, SourcePromo, SourceFuzzy}

// Print writes a human-readable summary: shares by source, a table by type, the top missed
// keys and spares (at most top of each).
func (st Stats) Print(w io.Writer, top int) {
	fmt.Fprintf(w, "requests: %d\n", st.Total)
	if st.Unreadable > 0 {
		fmt.Fprintf(w, "unreadable lines: %d, skipped (first: %s)\n", st.Unreadable, st.FirstUnreadable)
	}
	if st.Truncated > 0 {
		fmt.Fprintf(w, "truncated lines: %d (long fields cut by replay to fit %d bytes)\n", st.Truncated, MaxLogLine)
	}
	if st.Total == 0 {
		return
	}
	pct := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	}
	sources := mapx.OrderedKeys(st.BySource, sourceOrder)
	for _, s := range sources {
		fmt.Fprintf(w, "  %-10s %6d  %6s\n", s, st.BySource[s], pct(st.BySource[s], st.Total))
	}
	hits := 0
	for _, s := range hitSources {
		hits += st.BySource[s]
	}
	fmt.Fprintf(w, "answered from the recording (exact, search, promo, fuzzy): %d, %s\n", hits, pct(hits, st.Total))
	if st.NotInRecording > 0 {
		fmt.Fprintf(w, "misses on recorded exchanges whose body is not in the recording (body not captured, or a revisit without its original): %d\n", st.NotInRecording)
	}
	fmt.Fprintf(w, "\nby type (%% of the type's requests):\n  %-9s %6s", "type", "total")
	for _, s := range sources {
		fmt.Fprintf(w, " %9s", s)
	}
	fmt.Fprintln(w)
	for _, t := range mapx.OrderedKeys(st.ByType, nil) {
		n := st.ByType[t]
		fmt.Fprintf(w, "  %-9s %6d", t, n)
		for _, s := range sources {
			fmt.Fprintf(w, " %9s", pct(st.ByTypeSource[t][s], n))
		}
		fmt.Fprintln(w)
	}
	if len(st.TopMissed) > 0 {
		if st.MissedOther > 0 {
			fmt.Fprintf(w, "\ntop missed keys (more than %d distinct; %d misses of further keys not ranked):\n", len(st.TopMissed), st.MissedOther)
		} else {
			fmt.Fprintf(w, "\ntop missed keys (%d distinct):\n", len(st.TopMissed))
		}
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
