package batch

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"sort"
	"time"
)

//go:embed index.html.tmpl
var indexTemplate string

var indexTmpl = template.Must(template.New("index").Funcs(template.FuncMap{
	"pct": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", *v*100)
	},
	"score": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.3g", *v)
	},
	"deref": func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	},
	"plural": func(n int, word string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, word)
		}
		return fmt.Sprintf("%d %ss", n, word)
	},
	"dur": func(ms int64) string {
		d := time.Duration(ms) * time.Millisecond
		if d < time.Minute {
			return fmt.Sprintf("%.1fs", d.Seconds())
		}
		return d.Round(time.Second).String()
	},
}).Parse(indexTemplate))

type indexCell struct {
	Run   *RunRow
	Class string // pass, fail, other, nobrowse, error
	// Flags are short notes shown in the cell: "no page opened", "judge error".
	Flags []string
}

type indexRow struct {
	Task  TaskRow
	Cells []indexCell
}

type statusCount struct {
	Name string
	N    int
}

// indexFailure is one infrastructure failure as the page lists it.
type indexFailure struct {
	Failure
	What string // "judge error"
}

type indexView struct {
	*Summary
	Repeats    []int
	PassKs     []int
	Rows       []indexRow
	StatusList []statusCount
	Failures   []indexFailure
	// NotScored counts runs without a score that are neither errors nor unfinished (a task
	// without grading, not executable, ...).
	NotScored int
}

// RenderIndex renders index.html for the summary: the pass rate over all runs in large
// type, a box naming every infrastructure failure and one naming the runs that opened no
// page, then a table of tasks × repeats with score, status, flags, duration, request
// shares and links, and pass rate and pass@k per task and overall. It has no script and
// prints readably.
func RenderIndex(s *Summary) ([]byte, error) {
	v := indexView{Summary: s}
	maxK := s.Repeat
	for _, r := range s.Runs {
		maxK = max(maxK, r.Repeat)
	}
	for k := 1; k <= maxK; k++ {
		v.Repeats = append(v.Repeats, k)
	}
	for k := 1; k <= s.Repeat; k++ {
		v.PassKs = append(v.PassKs, k)
	}
	byKey := map[job]*RunRow{}
	for i := range s.Runs {
		r := &s.Runs[i]
		byKey[job{r.Task, r.Repeat}] = r
		if r.Score == nil && r.Status != StatusError && r.Status != StatusInterrupted && r.Status != StatusRunning {
			v.NotScored++
		}
	}
	for _, t := range s.Tasks {
		row := indexRow{Task: t}
		for _, k := range v.Repeats {
			r := byKey[job{t.Task, k}]
			c := indexCell{Run: r}
			if r != nil {
				c.Class = cellClass(r)
				if r.Status == StatusError {
					c.Flags = append(c.Flags, ErrorKindText(r.ErrorKind))
				}
				if r.NoBrowsing {
					c.Flags = append(c.Flags, "no page opened")
				}
			}
			row.Cells = append(row.Cells, c)
		}
		v.Rows = append(v.Rows, row)
	}
	for _, f := range s.Overall.Failures {
		v.Failures = append(v.Failures, indexFailure{Failure: f, What: ErrorKindText(f.Kind)})
	}
	for _, name := range slices.Sorted(maps.Keys(s.Overall.Statuses)) {
		v.StatusList = append(v.StatusList, statusCount{name, s.Overall.Statuses[name]})
	}
	sort.SliceStable(v.StatusList, func(i, j int) bool { return v.StatusList[i].N > v.StatusList[j].N })
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func cellClass(r *RunRow) string {
	switch {
	case r.Status == StatusError || r.Status == StatusInterrupted || r.Status == StatusRunning:
		return "error"
	case r.NoBrowsing:
		return "nobrowse"
	case r.Passed:
		return "pass"
	case r.Score != nil:
		return "fail"
	}
	return "other"
}
