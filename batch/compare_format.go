package batch

// This file renders a Comparison: a terminal table, a Markdown table and an HTML page.

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// noValue is shown for a value that is not known (no usage metered, no steps recorded).
const noValue = "—"

// compareCells are one row's cells as text, in compareHeader's order.
func compareCells(r *CompareRow) []string {
	pak := noValue
	if n := len(r.PassAtK); n > 0 {
		p := r.PassAtK[n-1]
		pak = fmt.Sprintf("pass@%d %s", p.K, pctText(p.Value))
	}
	rate := noValue
	if r.PassRate != nil {
		rate = fmt.Sprintf("%.0f%% ± %.0f%%", *r.PassRate*100, *r.Stderr*100)
	}
	tokens, cost := noValue, noValue
	if u := r.Usage; u != nil {
		tokens = fmt.Sprintf("%s in / %s out", count(u.InputTokens), count(u.OutputTokens))
		if u.CostUSD != nil {
			cost = fmt.Sprintf("$%.4f", *u.CostUSD)
		} else {
			cost = fmt.Sprintf("≥ $%.4f (%d calls unpriced)", u.KnownCostUSD, u.UnpricedCalls)
		}
		if u.Runs != r.Runs {
			tokens += fmt.Sprintf(" (%d of %d runs)", u.Runs, r.Runs)
		}
	}
	flag := ""
	if r.ProvenanceDiffers {
		flag = "DIFFERS: " + strings.Join(r.DiffersIn, ", ")
	}
	return []string{r.Agent, r.Task, fmt.Sprint(r.Runs), rate, pak, statusText(r), medianText(r.MedianToolCalls, false),
		medianText(r.MedianRequests, false), medianText(r.MedianDurationMS, true), tokens, cost, provText(r.Provenance), flag}
}

var compareHeader = []string{"agent", "task", "runs", "pass rate ± se", "pass@k", "statuses", "tool calls", "requests",
	"wall time", "tokens", "cost", "provenance (recording grading rules pab)", "provenance check"}

// count is a token count, short.
func count(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// statusText is the status counts, sorted by name, errors by kind.
func statusText(r *CompareRow) string {
	var parts []string
	names := make([]string, 0, len(r.Statuses))
	for s := range r.Statuses {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		if s == StatusError {
			kinds := make([]string, 0, len(r.ErrorKinds))
			for k := range r.ErrorKinds {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				parts = append(parts, fmt.Sprintf("%d error:%s", r.ErrorKinds[k], k))
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", r.Statuses[s], s))
	}
	if r.NoBrowsing > 0 && r.Statuses[StatusNoBrowsing] != r.NoBrowsing {
		parts = append(parts, fmt.Sprintf("(%d opened no page)", r.NoBrowsing))
	}
	return strings.Join(parts, ", ")
}

func medianText(v *float64, ms bool) string {
	if v == nil {
		return noValue
	}
	if ms {
		d := time.Duration(*v) * time.Millisecond
		if d < time.Minute {
			return fmt.Sprintf("%.1fs", d.Seconds())
		}
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%g", *v)
}

func short(h string) string {
	if h == "" {
		return "?"
	}
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

func provText(p CompareProvenance) string {
	if !p.known() {
		return "unknown (not graded)"
	}
	pab := p.PabVersion
	if p.PabCommit != "" {
		pab += "@" + short(p.PabCommit)
	}
	return short(p.Recording) + " " + short(p.Grading) + " " + short(p.Rules) + " " + pab
}

// WriteText writes the comparison as an aligned table for a terminal, then its warnings.
func (c *Comparison) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(compareHeader, "\t"))
	for i := range c.Rows {
		fmt.Fprintln(tw, strings.Join(compareCells(&c.Rows[i]), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, wn := range c.Warnings {
		if _, err := fmt.Fprintln(w, "warning:", wn); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, compareLegend)
	return err
}

const compareLegend = "pass rate ± its standard error sqrt(p(1-p)/n); pass@k unbiased for the largest k; tool calls and requests are medians per run; — = not recorded"

// mdEscape makes s safe in a Markdown table cell.
func mdEscape(s string) string {
	s = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
	return s
}

// WriteMarkdown writes the comparison as a GitHub-flavoured Markdown table, then its
// warnings as a list.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("| " + strings.Join(compareHeader, " | ") + " |\n|")
	for range compareHeader {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for i := range c.Rows {
		cells := compareCells(&c.Rows[i])
		for j := range cells {
			cells[j] = mdEscape(cells[j])
			if j == len(cells)-1 && cells[j] != "" {
				cells[j] = "**" + cells[j] + "**"
			}
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	if len(c.Warnings) > 0 {
		b.WriteString("\n")
		for _, wn := range c.Warnings {
			b.WriteString("- **warning:** " + mdEscape(wn) + "\n")
		}
	}
	b.WriteString("\n" + compareLegend + "\n")
	_, err := w.Write(b.Bytes())
	return err
}

var compareTmpl = template.Must(template.New("compare").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pab compare</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; }
table { border-collapse: collapse; }
th, td { border: 1px solid #c9c9c9; padding: .3em .5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr.differs td { background: #fff4e0; }
.warn { border: 2px solid #c77700; background: #fff4e0; padding: .5em .8em; margin: 0 0 1em; }
.small { color: #555; font-size: .85em; }
</style></head><body>
<h1>pab compare</h1>
<p class="small">{{range $i, $b := .C.Batches}}{{if $i}}; {{end}}<code>{{$b.Dir}}</code> ({{$b.Agent}}, {{$b.Runs}} runs){{end}}</p>
{{if .C.Warnings}}<div class="warn"><strong>Provenance differs</strong><ul>{{range .C.Warnings}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
<table><thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr{{if .Differs}} class="differs"{{end}}>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
<p class="small">{{.Legend}}</p>
</body></html>
`))

// WriteHTML writes the comparison as a self-contained HTML page (no script, no network).
func (c *Comparison) WriteHTML(w io.Writer) error {
	type row struct {
		Cells   []string
		Differs bool
	}
	var rows []row
	for i := range c.Rows {
		rows = append(rows, row{Cells: compareCells(&c.Rows[i]), Differs: c.Rows[i].ProvenanceDiffers})
	}
	return compareTmpl.Execute(w, map[string]any{"C": c, "Header": compareHeader, "Rows": rows, "Legend": compareLegend})
}
