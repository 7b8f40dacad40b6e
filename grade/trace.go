package grade

import (
	"fmt"
	"io"
	"strings"

	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// MaxLogLine is the longest replay log line read, in bytes (replay.MaxReadLogLine, 1 MiB:
// replay writes lines of at most replay.MaxLogLine); a longer line is counted as bad.
const MaxLogLine = replay.MaxReadLogLine

// maxBadLines is how many bad line numbers a LogRead keeps.
const maxBadLines = 20

// LogRead is a replay log as read: how many lines, an account of the bad ones and, when
// read with ReadLog, the good lines.
type LogRead struct {
	// File is the log's name as given.
	File string `json:"file"`
	// Lines counts the non-blank lines read, good and bad.
	Lines int `json:"lines"`
	// Bad counts the lines that were skipped: not JSON, truncated, not a replay log line, or
	// over MaxLogLine.
	Bad int `json:"bad"`
	// BadLines are the first 20 bad lines: their numbers in the file (from 1, blank lines
	// counted) and what was wrong.
	BadLines []BadLine `json:"bad_lines,omitempty"`
	// Truncated counts the good lines whose long fields replay cut to fit its bound
	// (replay.LogLine.Truncated); set by grading.
	Truncated int `json:"truncated,omitempty"`
	// Recording and RecordingOf are what the log's header line (replay.LogHeader) says the
	// replay served; empty when the log has none (a replay of an older pab, or one not
	// told its recording).
	Recording   string `json:"recording,omitempty"`
	RecordingOf string `json:"recording_of,omitempty"`
	// Requests are the good lines in file order (ReadLog only; GradeLog keeps none).
	Requests []replay.LogLine `json:"-"`
	// lineNos are the file line numbers of Requests (ReadLog).
	lineNos []int
}

// BadLine is one skipped log line.
type BadLine struct {
	Line    int    `json:"line"`
	Problem string `json:"problem"`
}

// ReadLog reads a replay log (JSON Lines of replay.LogLine, as pab replay --log writes)
// tolerantly and keeps every good line in memory, for small logs and tests (pab grade and
// pab run use GradeLog, which streams): blank lines are skipped; a line that is not a JSON
// object, lacks method, url or source, or is longer than MaxLogLine is counted as bad
// (without being held in memory whole) and reading goes on. Only a read error of r itself
// is returned as an error.
func ReadLog(r io.Reader, name string) (*LogRead, error) {
	lr := &LogRead{File: name}
	sc := replay.NewLogScanner(r)
	for sc.Scan() {
		lr.Lines++
		if l := sc.Log(); l != nil {
			lr.Requests = append(lr.Requests, *l)
			lr.lineNos = append(lr.lineNos, sc.Line())
		} else {
			lr.bad(sc.Line(), sc.Problem())
		}
	}
	if h := sc.Header(); h != nil {
		lr.Recording, lr.RecordingOf = h.Recording, h.RecordingOf
	}
	if err := sc.Err(); err != nil {
		return lr, fmt.Errorf("read %s line %d: %w", name, sc.Line()+1, err)
	}
	return lr, nil
}

func (lr *LogRead) bad(n int, problem string) {
	lr.Bad++
	if len(lr.BadLines) < maxBadLines {
		lr.BadLines = append(lr.BadLines, BadLine{Line: n, Problem: problem})
	}
}

// shorten cuts s to n bytes on a character boundary, marking the cut with "...".
func shorten(s string, n int) string { return textcut.Cut(s, n, "...") }

// GlobMatch reports whether s matches the glob pattern: `*` matches any run of characters
// (including "/" and none), every other byte matches itself.
func GlobMatch(pattern, s string) bool {
	// Iterative matcher with one backtrack point: linear in practice, never exponential.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// fromRecording reports whether a log line was answered from the recording.
func fromRecording(l *replay.LogLine) bool {
	switch l.Source {
	case replay.SourceExact, replay.SourceSearch, replay.SourcePromo, replay.SourceFuzzy:
		return true
	}
	return false
}

// Matches reports whether the log line l fits m. On a line whose URL replay cut
// (replay.LogLine.URLSize), the cut URL matches only when it settles the match whatever
// followed (the pattern ends in '*'); a method that may have been cut never matches. See
// mayMatch for the lines that may match.
func (m *RequestMatch) Matches(l *replay.LogLine) bool {
	if m.Method != "" && (!strings.EqualFold(m.Method, l.Method) || methodCut(l)) {
		return false
	}
	if m.Hit != nil && *m.Hit != fromRecording(l) {
		return false
	}
	if m.Status != 0 && m.Status != l.Status {
		return false
	}
	if l.URLSize > len(l.URL) && !strings.HasSuffix(m.URL, "*") {
		return false
	}
	return GlobMatch(m.URL, l.URL)
}

// String describes m as written: "POST */cart/add* hit".
func (m *RequestMatch) String() string {
	var b strings.Builder
	if m.Method != "" {
		b.WriteString(m.Method + " ")
	} else {
		b.WriteString("any method ")
	}
	b.WriteString(m.URL)
	if m.Hit != nil {
		if *m.Hit {
			b.WriteString(", answered from the recording")
		} else {
			b.WriteString(", not answered from the recording")
		}
	}
	if m.Status != 0 {
		fmt.Fprintf(&b, ", status %d", m.Status)
	}
	return b.String()
}

// isPage reports whether a log line is a page the agent opened: Sec-Fetch-Dest "document";
// for a client that sends no Fetch Metadata, a request replay typed as a document (which
// pagesOf then checks against the frames of the page before it).
func isPage(l *replay.LogLine) bool {
	if l.Dest != "" {
		return l.Dest == "document"
	}
	return l.Type == replay.TypeDocument
}

// pagesOf lists the pages the agent opened and the ones that came back 404. A document
// request without Sec-Fetch-Dest (a plain-HTTP site: browsers send Fetch Metadata to HTTPS
// only) whose URL is a frame of the last page opened (frames maps the page's log entry to
// its <iframe>/<frame> URLs, see FrameSources) is that page's frame, not a page: each frame
// URL is taken once, and a frame's own frames are added to the ones awaited.
func pagesOf(lines []replay.LogLine, rs *rules.Set, titles map[string]string, frames map[string][]string) Pages {
	var lookup func(string) []string
	if frames != nil {
		lookup = func(entry string) []string { return frames[entry] }
	}
	a := newPagesAcc(rs, titles, lookup)
	for i := range lines {
		a.add(&lines[i])
	}
	return a.result()
}

// hostOf returns the host (with port, if any) of an absolute URL.
func hostOf(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if i := strings.IndexAny(u, "/?#"); i >= 0 {
		u = u[:i]
	}
	return strings.ToLower(u)
}

// routeOf returns the path of a matching key ("GET host/a/b?x=1 #body:..." -> "/a/b").
func routeOf(key string) string {
	if i := strings.IndexByte(key, ' '); i >= 0 {
		key = key[i+1:]
	}
	if i := strings.Index(key, " #body:"); i >= 0 {
		key = key[:i]
	}
	if i := strings.IndexByte(key, '?'); i >= 0 {
		key = key[:i]
	}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[i:]
	}
	return "/"
}
