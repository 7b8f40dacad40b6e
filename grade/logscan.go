package grade

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"

	"github.com/pab-dev/pab/internal/textcut"
)

// Bounds of what grading keeps from a replay log, so that pab grade runs in memory
// independent of the log's length: the result holds at most about 16 MiB of pages and
// requests, whatever the log (pab grade on a hostile 1 GB log that fills every bound: 151 MB
// of memory, result.json and report.html included).
const (
	// MaxPagesOpened is how many opened pages a result lists; Pages.OpenedOmitted counts
	// the rest.
	MaxPagesOpened = 5000
	// MaxPagesNotFound is how many distinct keys of pages answered 404 a result lists, the
	// first met; Pages.NotFoundOmitted counts the 404 pages of further keys.
	MaxPagesNotFound = 1000
	// MaxResultURL bounds a URL or key as a result shows it (pages, trace requests), in
	// bytes; a longer one is cut and ends in "…".
	MaxResultURL = 2 << 10

	maxSourceLabels = 64        // distinct sources counted in Result.Requests; more are "(other)"
	maxAwaited      = 4096      // frame URLs awaited at once (pagesAcc)
	otherSource     = "(other)" // Result.Requests key of the sources over maxSourceLabels
)

// GradeLog grades a run as Grade does, reading its replay log from r (name is the file
// name for the result and errors) once, line by line, instead of in.Log: only counters, the
// first MaxPagesOpened pages, MaxPagesNotFound not-found keys and the first match of each
// trace and not_executable entry are kept, so memory does not grow with the log. The error
// is a read error of r (naming the line); lines that cannot be read are counted as Grade
// describes.
func GradeLog(ctx context.Context, in Input, r io.Reader, name string, opts Options) (*Result, error) {
	lr := &LogRead{File: name}
	sum := newLogSummary(&in)
	sc := replay.NewLogScanner(r)
	for sc.Scan() {
		lr.Lines++
		if l := sc.Log(); l != nil {
			sum.add(sc.Line(), l)
		} else {
			lr.bad(sc.Line(), sc.Problem())
		}
	}
	if h := sc.Header(); h != nil {
		lr.Recording, lr.RecordingOf = h.Recording, h.RecordingOf
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s line %d: %w", name, sc.Line()+1, err)
	}
	in.Log = lr
	return grade(ctx, in, sum, opts), nil
}

// summaryOf builds the log summary of in.Log's lines (as read by ReadLog, or made by hand).
func summaryOf(in *Input) *logSummary {
	if in.Log == nil {
		return nil
	}
	sum := newLogSummary(in)
	for i := range in.Log.Requests {
		line := i + 1
		if i < len(in.Log.lineNos) {
			line = in.Log.lineNos[i]
		}
		sum.add(line, &in.Log.Requests[i])
	}
	return sum
}

// logSummary is what grading needs from a replay log, built one line at a time.
type logSummary struct {
	requests  int            // good lines
	truncated int            // good lines replay cut to fit its bound
	bySource  map[string]int // requests by source (Result.Requests)
	pages     *pagesAcc
	trace     []matchState // one per Grading.Trace entry
	notExec   []matchState // one per Grading.NotExecutable entry
	hosts     map[string]bool
	ownHost   bool   // some request (trackers aside) is for a recorded host
	foreign   string // else the first host met
	foreignN  int    // and how many requests there were
}

// matchState is the first line of the log matching one entry, and the first truncated line
// that may match it (its URL or method was cut, so pab cannot tell).
type matchState struct {
	m         *RequestMatch
	first     *Request
	maybe     *Request
	maybeLine int    // the maybe request's line in the log file
	maybeWhy  string // what was cut
}

func newLogSummary(in *Input) *logSummary {
	s := &logSummary{bySource: map[string]int{}, hosts: in.RecordedHosts}
	frames := in.FramesOf
	if in.Frames != nil {
		m := in.Frames
		frames = func(entry string) []string { return m[entry] }
	}
	s.pages = newPagesAcc(in.Rules, in.Titles, frames)
	if g := in.Grading; g != nil {
		for _, t := range g.Trace {
			m := t.Must
			if m == nil {
				m = t.MustNot
			}
			s.trace = append(s.trace, matchState{m: m})
		}
		for _, ne := range g.NotExecutable {
			s.notExec = append(s.notExec, matchState{m: ne.Must})
		}
	}
	return s
}

// add takes one good line of the log; line is its number in the file.
func (s *logSummary) add(line int, l *replay.LogLine) {
	s.requests++
	n := s.requests
	src := string(l.Source)
	if _, ok := s.bySource[src]; !ok && len(s.bySource) >= maxSourceLabels {
		src = otherSource
	}
	s.bySource[cutResult(src, 64)]++
	if l.Truncated {
		s.truncated++
	}
	s.pages.add(l)
	if s.hosts != nil && !s.ownHost && l.Source != replay.SourceBlocked {
		h := recordedHost(hostOf(l.URL))
		if s.hosts[h] {
			s.ownHost = true
		} else {
			if s.foreign == "" {
				s.foreign = cutResult(h, 256)
			}
			s.foreignN++
		}
	}
	for _, set := range [][]matchState{s.trace, s.notExec} {
		for i := range set {
			ms := &set[i]
			if ms.first != nil {
				continue
			}
			if ms.m.Matches(l) {
				ms.first = requestOf(n, l)
			} else if ms.maybe == nil && l.Truncated && ms.m.mayMatch(l) {
				ms.maybe, ms.maybeLine, ms.maybeWhy = requestOf(n, l), line, cutWhat(l)
			}
		}
	}
}

// requestOf is line l, the n-th good line of the log, as a result shows it.
func requestOf(n int, l *replay.LogLine) *Request {
	return &Request{Line: n, Time: cutResult(l.Time, 64), Method: cutResult(l.Method, 64), URL: cutResult(l.URL, MaxResultURL), Status: l.Status, Source: cutResult(string(l.Source), 64)}
}

// cutWhat says what replay cut in a truncated line, for a reason.
func cutWhat(l *replay.LogLine) string {
	var parts []string
	if methodCut(l) {
		parts = append(parts, fmt.Sprintf("its method was cut to %d bytes", len(l.Method)))
	}
	if l.URLSize > len(l.URL) {
		parts = append(parts, fmt.Sprintf("its URL was cut to %d of %d bytes", len(l.URL), l.URLSize))
	}
	return strings.Join(parts, " and ")
}

// methodCut reports whether the method of a truncated line may have been cut.
func methodCut(l *replay.LogLine) bool {
	return l.Truncated && len(l.Method) >= replay.MaxLogMethod
}

// mayMatch reports whether a truncated line l may be a request m matches: its hit and status
// fit, and its cut method and URL are prefixes of values that would.
func (m *RequestMatch) mayMatch(l *replay.LogLine) bool {
	if m.Hit != nil && *m.Hit != fromRecording(l) {
		return false
	}
	if m.Status != 0 && m.Status != l.Status {
		return false
	}
	if m.Method != "" && !strings.EqualFold(m.Method, l.Method) {
		if !methodCut(l) || len(m.Method) < len(l.Method) || !strings.EqualFold(m.Method[:len(l.Method)], l.Method) {
			return false
		}
	}
	if l.URLSize > len(l.URL) {
		return globMayExtend(m.URL, l.URL)
	}
	return GlobMatch(m.URL, l.URL)
}

// globMayExtend reports whether some string that starts with prefix matches the glob
// pattern. Up to the pattern's first '*' the prefix and the pattern must agree; past it, the
// star can take the rest of the prefix.
func globMayExtend(pattern, prefix string) bool {
	i := strings.IndexByte(pattern, '*')
	if i < 0 {
		return strings.HasPrefix(pattern, prefix)
	}
	head := pattern[:i]
	return strings.HasPrefix(prefix, head) || strings.HasPrefix(head, prefix)
}

// cutResult cuts s to at most n bytes at a character boundary, ending in "…" when cut.
func cutResult(s string, n int) string { return textcut.Fit(s, n, "…") }

// pagesAcc builds Pages one log line at a time, within MaxPagesOpened and MaxPagesNotFound.
type pagesAcc struct {
	rs      *rules.Set
	titles  map[string]string
	frames  func(entry string) []string // nil: no frame is told from a page
	ps      Pages
	byKey   map[string]int // not-found key → position in ps.NotFound
	awaited map[string]int // frame URLs of the last page not loaded yet
}

func newPagesAcc(rs *rules.Set, titles map[string]string, frames func(string) []string) *pagesAcc {
	return &pagesAcc{rs: rs, titles: titles, frames: frames,
		ps: Pages{Opened: []Page{}, NotFound: []NotFound{}}, byKey: map[string]int{}, awaited: map[string]int{}}
}

// await adds the frames of the recorded document entry to the ones awaited.
func (a *pagesAcc) await(entry string) {
	if a.frames == nil || entry == "" {
		return
	}
	for _, u := range a.frames(entry) {
		if len(a.awaited) >= maxAwaited {
			return
		}
		a.awaited[u]++
	}
}

// add takes one log line (see pagesOf for what counts as a page).
func (a *pagesAcc) add(l *replay.LogLine) {
	if !isPage(l) {
		return
	}
	if l.Dest == "" && len(a.awaited) > 0 {
		if k := logURLKey(l.URL); a.awaited[k] > 0 {
			if a.awaited[k]--; a.awaited[k] == 0 {
				delete(a.awaited, k)
			}
			a.await(l.Entry)
			return
		}
	}
	clear(a.awaited)
	a.await(l.Entry)
	if len(a.ps.Opened) < MaxPagesOpened {
		a.ps.Opened = append(a.ps.Opened, Page{
			Time: cutResult(l.Time, 64), Method: cutResult(l.Method, 64), URL: cutResult(l.URL, MaxResultURL),
			Status: l.Status, Source: cutResult(string(l.Source), 64), Title: a.titles[l.Entry],
		})
	} else {
		a.ps.OpenedOmitted++
	}
	if l.Status != 404 {
		return
	}
	key := l.Key
	if key == "" {
		key = l.Method + " " + l.URL
	}
	key = cutResult(key, MaxResultURL)
	if j, ok := a.byKey[key]; ok {
		a.ps.NotFound[j].Count++
		return
	}
	if len(a.ps.NotFound) >= MaxPagesNotFound {
		a.ps.NotFoundOmitted++
		return
	}
	host := hostOf(l.URL)
	site := a.rs.Site(host)
	if site == "" {
		site = host
	}
	route := l.Endpoint
	if route == "" {
		route = routeOf(key)
	}
	a.byKey[key] = len(a.ps.NotFound)
	a.ps.NotFound = append(a.ps.NotFound, NotFound{
		Key: key, Site: cutResult(site, 256), Route: cutResult(route, MaxResultURL), FirstURL: cutResult(l.URL, MaxResultURL),
		Count: 1, Source: cutResult(string(l.Source), 64),
	})
}

// result returns the pages, the not-found keys most frequent first.
func (a *pagesAcc) result() Pages {
	ps := a.ps
	ps.NotFound = append([]NotFound{}, a.ps.NotFound...)
	sort.SliceStable(ps.NotFound, func(i, j int) bool { return ps.NotFound[i].Count > ps.NotFound[j].Count })
	return ps
}
