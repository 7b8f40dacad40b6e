package grade

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// MaxLogLine is the longest replay log line read, in bytes; a longer line is counted as bad.
const MaxLogLine = 16 << 20

// maxBadLines is how many bad line numbers a LogRead keeps.
const maxBadLines = 20

// LogRead is a replay log read with ReadLog: the good lines and an account of the bad ones.
type LogRead struct {
	// File is the log's name as given.
	File string `json:"file"`
	// Lines counts the non-blank lines read, good and bad.
	Lines int `json:"lines"`
	// Bad counts the lines that were skipped: not JSON, truncated, not a replay log line, or
	// over MaxLogLine.
	Bad int `json:"bad"`
	// BadLines are the numbers (from 1) of the first 20 bad lines, with what was wrong.
	BadLines []BadLine `json:"bad_lines,omitempty"`
	// Requests are the good lines in file order.
	Requests []replay.LogLine `json:"-"`
}

// BadLine is one skipped log line.
type BadLine struct {
	Line    int    `json:"line"`
	Problem string `json:"problem"`
}

// ReadLog reads a replay log (JSON Lines of replay.LogLine, as pab replay --log writes)
// tolerantly: blank lines are skipped; a line that is not a JSON object, lacks method, url or
// source, or is longer than MaxLogLine is counted as bad and reading goes on. Only a read
// error of r itself is returned as an error.
func ReadLog(r io.Reader, name string) (*LogRead, error) {
	lr := &LogRead{File: name}
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return lr, fmt.Errorf("read %s line %d: %w", name, n+1, err)
		}
		if len(line) > 0 || tooLong {
			n++
			data := bytes.TrimSpace(line)
			switch {
			case tooLong:
				lr.bad(n, fmt.Sprintf("longer than %d bytes", MaxLogLine))
			case len(data) == 0:
				n-- // blank
			default:
				var l *replay.LogLine
				var typeErr *json.UnmarshalTypeError
				if jerr := json.Unmarshal(data, &l); errors.As(jerr, &typeErr) {
					lr.bad(n, "not a replay log line (want a JSON object with method, url and source)")
				} else if jerr != nil {
					lr.bad(n, "not JSON: "+shorten(jerr.Error(), 120))
				} else if l == nil || l.Method == "" || l.URL == "" || l.Source == "" {
					lr.bad(n, "not a replay log line (needs method, url and source)")
				} else {
					lr.Requests = append(lr.Requests, *l)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	lr.Lines = n
	return lr, nil
}

func (lr *LogRead) bad(n int, problem string) {
	lr.Bad++
	if len(lr.BadLines) < maxBadLines {
		lr.BadLines = append(lr.BadLines, BadLine{Line: n, Problem: problem})
	}
}

// readLine returns the next line without its newline, reading at most MaxLogLine bytes of
// it; the rest of a longer line is discarded and tooLong set.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	return readLineLimit(br, MaxLogLine)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

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

// Matches reports whether the log line l fits m.
func (m *RequestMatch) Matches(l *replay.LogLine) bool {
	if m.Method != "" && !strings.EqualFold(m.Method, l.Method) {
		return false
	}
	if m.Hit != nil && *m.Hit != fromRecording(l) {
		return false
	}
	if m.Status != 0 && m.Status != l.Status {
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

// first returns the index of the first line matching m, or -1.
func (m *RequestMatch) first(lines []replay.LogLine) int {
	for i := range lines {
		if m.Matches(&lines[i]) {
			return i
		}
	}
	return -1
}

// isPage reports whether a log line is a page the agent opened: Sec-Fetch-Dest "document";
// for a client that sends no Fetch Metadata, a request replay typed as a document.
func isPage(l *replay.LogLine) bool {
	if l.Dest != "" {
		return l.Dest == "document"
	}
	return l.Type == replay.TypeDocument
}

// pagesOf lists the pages the agent opened and the ones that came back 404.
func pagesOf(lines []replay.LogLine, rs *rules.Set, titles map[string]string) Pages {
	ps := Pages{Opened: []Page{}, NotFound: []NotFound{}}
	byKey := map[string]int{}
	for i := range lines {
		l := &lines[i]
		if !isPage(l) {
			continue
		}
		ps.Opened = append(ps.Opened, Page{
			Time: l.Time, Method: l.Method, URL: l.URL, Status: l.Status, Source: l.Source,
			Title: titles[l.Entry],
		})
		if l.Status != 404 {
			continue
		}
		key := l.Key
		if key == "" {
			key = l.Method + " " + l.URL
		}
		if j, ok := byKey[key]; ok {
			ps.NotFound[j].Count++
			continue
		}
		host := hostOf(l.URL)
		site := rs.Site(host)
		if site == "" {
			site = host
		}
		route := l.Endpoint
		if route == "" {
			route = routeOf(key)
		}
		byKey[key] = len(ps.NotFound)
		ps.NotFound = append(ps.NotFound, NotFound{
			Key: key, Site: site, Route: route, FirstURL: l.URL, Count: 1, Source: l.Source,
		})
	}
	sort.SliceStable(ps.NotFound, func(a, b int) bool { return ps.NotFound[a].Count > ps.NotFound[b].Count })
	return ps
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
