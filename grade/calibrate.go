package grade

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// MaxLabelLine bounds one line of a labels file, in bytes.
const MaxLabelLine = 2 << 20

// Label is one line of a labels file (JSON Lines): a run of a task and a person's verdict
// on some of its checks (and, optionally, its require items).
//
//	{"task": "books-sapiens-price", "answer": "It costs £54.23.", "verdicts": {"right_book": true}}
//	{"task": "books-sapiens-price", "answer_file": "runs/3/answer.txt", "verdicts": {"right_book": "no"}}
//	{"task": "books-sapiens-price", "result": "runs/3/result.json", "verdicts": {"right_book": "yes"}}
//
// With answer or answer_file the judge is asked (through its cache); with result the
// verdicts recorded in that result.json are compared, and no judge is needed.
type Label struct {
	Task       string `json:"task"`
	Answer     string `json:"answer,omitempty"`
	AnswerFile string `json:"answer_file,omitempty"`
	Result     string `json:"result,omitempty"`
	// Verdicts are the person's verdicts by item id: true/"yes"/"pass" or
	// false/"no"/"fail".
	Verdicts map[string]bool `json:"-"`
	// Line is the line number in the labels file.
	Line int `json:"-"`
}

// ReadLabels reads a labels file strictly: every non-blank line must be a Label with a task,
// exactly one of answer, answer_file and result, and at least one verdict; errors name the
// file and line.
func ReadLabels(r io.Reader, name string) ([]Label, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Label
	for n := 1; ; n++ {
		line, tooLong, err := readLineLimit(br, MaxLabelLine)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if tooLong {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n, MaxLabelLine)
		}
		if data := bytes.TrimSpace(line); len(data) > 0 {
			l, perr := parseLabel(data)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %v", name, n, perr)
			}
			l.Line = n
			out = append(out, l)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no labels", name)
	}
	return out, nil
}

func parseLabel(data []byte) (Label, error) {
	var raw struct {
		Label
		Verdicts map[string]any `json:"verdicts"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Label{}, fmt.Errorf("not a label (want {\"task\", \"answer\"|\"answer_file\"|\"result\", \"verdicts\"}): %v", err)
	}
	l := raw.Label
	if l.Task == "" {
		return l, errors.New("task is missing")
	}
	given := 0
	for _, s := range []string{l.Answer, l.AnswerFile, l.Result} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return l, errors.New("give exactly one of answer, answer_file and result")
	}
	if len(raw.Verdicts) == 0 {
		return l, errors.New("verdicts is missing or empty (item id: true or false)")
	}
	l.Verdicts = map[string]bool{}
	for id, v := range raw.Verdicts {
		switch t := v.(type) {
		case bool:
			l.Verdicts[id] = t
		case string:
			switch NormText(t) {
			case "yes", "pass", "true":
				l.Verdicts[id] = true
			case "no", "fail", "false":
				l.Verdicts[id] = false
			default:
				return l, fmt.Errorf("verdict %s: want true or false (or yes/no, pass/fail), got %q", id, t)
			}
		default:
			return l, fmt.Errorf("verdict %s: want true or false, got %s", id, jsonType(v))
		}
	}
	return l, nil
}

// readLineLimit reads one line (without its newline) of at most limit bytes; the rest of a
// longer line is discarded and tooLong set.
func readLineLimit(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err != nil || !isPrefix {
			return line, tooLong, err
		}
	}
}

// Agreement is how often the judge agreed with a person on one item.
type Agreement struct {
	Task string `json:"task"`
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// N counts the runs with both verdicts; Agree those where they were the same.
	N     int `json:"n"`
	Agree int `json:"agree"`
	// Percent is 100 × Agree / N.
	Percent float64 `json:"percent"`
	// Kappa is Cohen's kappa, (po − pe) / (1 − pe); nil when undefined (both raters gave
	// one and the same verdict every time, pe = 1).
	Kappa *float64 `json:"kappa"`
	// Confusion counts [person yes/no][judge yes/no]: YesYes, YesNo, NoYes, NoNo.
	YesYes int `json:"person_yes_judge_yes"`
	YesNo  int `json:"person_yes_judge_no"`
	NoYes  int `json:"person_no_judge_yes"`
	NoNo   int `json:"person_no_judge_no"`
	// Errors counts runs where the judge gave no verdict (error or skipped).
	Errors int `json:"errors"`
}

// Calibration is the outcome of Calibrate.
type Calibration struct {
	Items []*Agreement `json:"items"`
	// Problems are labels that could not be used (unknown item id, unreadable answer).
	Problems []string `json:"problems,omitempty"`
}

// Verdicts returns an item result as a verdict (pass = true); ok is false for an item that
// was not decided (error or skipped).
func itemVerdict(it Item) (pass, ok bool) {
	switch it.Result {
	case ResultPass:
		return true, true
	case ResultFail:
		return false, true
	}
	return false, false
}

// Agree adds one pair of verdicts to an Agreement.
func (a *Agreement) add(person, judge bool) {
	a.N++
	switch {
	case person && judge:
		a.YesYes++
	case person && !judge:
		a.YesNo++
	case !person && judge:
		a.NoYes++
	default:
		a.NoNo++
	}
	if person == judge {
		a.Agree++
	}
}

// finish computes Percent and Kappa.
func (a *Agreement) finish() {
	if a.N == 0 {
		return
	}
	n := float64(a.N)
	po := float64(a.Agree) / n
	a.Percent = math.Round(po*1000) / 10
	pYes := float64(a.YesYes+a.YesNo) / n // person says yes
	jYes := float64(a.YesYes+a.NoYes) / n // judge says yes
	pe := pYes*jYes + (1-pYes)*(1-jYes)
	if pe >= 1 {
		return
	}
	k := (po - pe) / (1 - pe)
	k = math.Round(k*1000) / 1000
	a.Kappa = &k
}

// Kappa returns Cohen's kappa for two raters' yes/no verdicts given as a 2×2 table, and
// false when it is undefined.
func Kappa(yesYes, yesNo, noYes, noNo int) (float64, bool) {
	a := &Agreement{}
	for range yesYes {
		a.add(true, true)
	}
	for range yesNo {
		a.add(true, false)
	}
	for range noYes {
		a.add(false, true)
	}
	for range noNo {
		a.add(false, false)
	}
	a.finish()
	if a.Kappa == nil {
		return 0, false
	}
	return *a.Kappa, true
}

// CalibrationRun is one labelled run, graded: the person's verdicts and the result.
type CalibrationRun struct {
	Label  Label
	Result *Result
}

// Calibrate compares the person's verdicts with the items of each run's result (for
// checks, the judge's answer; for require items, the judge's extraction compared by pab).
func Calibrate(runs []CalibrationRun) *Calibration {
	c := &Calibration{}
	byKey := map[string]*Agreement{}
	for _, run := range runs {
		items := map[string]Item{}
		for _, it := range run.Result.Items {
			items[it.ID] = it
		}
		ids := make([]string, 0, len(run.Label.Verdicts))
		for id := range run.Label.Verdicts {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			it, ok := items[id]
			if !ok || (it.Kind != KindCheck && it.Kind != KindRequire) {
				c.Problems = append(c.Problems, fmt.Sprintf("line %d: task %s has no check or require item %q", run.Label.Line, run.Label.Task, id))
				continue
			}
			key := run.Label.Task + "\x00" + id
			a := byKey[key]
			if a == nil {
				a = &Agreement{Task: run.Label.Task, ID: id, Kind: it.Kind}
				byKey[key] = a
				c.Items = append(c.Items, a)
			}
			judge, ok := itemVerdict(it)
			if !ok {
				a.Errors++
				continue
			}
			a.add(run.Label.Verdicts[id], judge)
		}
		if run.Result.Status == StatusError {
			c.Problems = append(c.Problems, fmt.Sprintf("line %d: %s", run.Label.Line, strings.Join(run.Result.Notes, "; ")))
		}
	}
	for _, a := range c.Items {
		a.finish()
	}
	sort.SliceStable(c.Items, func(i, j int) bool {
		if c.Items[i].Task != c.Items[j].Task {
			return c.Items[i].Task < c.Items[j].Task
		}
		return c.Items[i].ID < c.Items[j].ID
	})
	return c
}

// Print writes the calibration as a table.
func (c *Calibration) Print(w io.Writer) {
	fmt.Fprintf(w, "%-28s %-24s %-7s %4s %6s %7s %s\n", "task", "item", "kind", "n", "agree", "kappa", "person yes/no × judge yes/no")
	for _, a := range c.Items {
		kappa := "n/a"
		if a.Kappa != nil {
			kappa = fmt.Sprintf("%.2f", *a.Kappa)
		}
		errs := ""
		if a.Errors > 0 {
			errs = fmt.Sprintf("  (%d without a judge verdict)", a.Errors)
		}
		fmt.Fprintf(w, "%-28s %-24s %-7s %4d %5.1f%% %7s yy=%d yn=%d ny=%d nn=%d%s\n",
			a.Task, a.ID, a.Kind, a.N, a.Percent, kappa, a.YesYes, a.YesNo, a.NoYes, a.NoNo, errs)
	}
	for _, p := range c.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
}
