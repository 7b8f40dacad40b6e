package main

// This file holds the statistics of the report: ranges, means, ratios and verdicts over
// runs, and go test -bench output parsed.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

func verdict(ok bool, miss string) string {
	if ok {
		return "met"
	}
	return "missed: " + miss
}

func rpsOf(r rec) float64 { return r.RPS }

func cpuOf(r rec) float64 { return r.CPUPerReq }

// ratioOf is mean f over p divided by mean f over q, with prec decimals.
func ratioOf(p, q []rec, f func(rec) float64, prec int) string {
	if len(p) == 0 || len(q) == 0 || mean(q, f) == 0 {
		return "—"
	}
	return "**" + strconv.FormatFloat(mean(p, f)/mean(q, f), 'f', prec, 64) + "×**"
}

// quantile is the q-quantile of sorted samples (nearest rank).
func quantile(s []float64, q float64) float64 {
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func filter(rs []rec, kind string) []rec {
	var out []rec
	for _, r := range rs {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

func mean(rs []rec, f func(rec) float64) float64 {
	if len(rs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, r := range rs {
		s += f(r)
	}
	return s / float64(len(rs))
}

func maxOf(rs []rec, f func(rec) float64) float64 {
	x := math.Inf(-1)
	for _, r := range rs {
		x = math.Max(x, f(r))
	}
	return x
}

func minOf(rs []rec, f func(rec) float64) float64 {
	x := math.Inf(1)
	for _, r := range rs {
		x = math.Min(x, f(r))
	}
	return x
}

func rng(rs []rec, f func(rec) float64, prec int) string {
	if len(rs) == 0 {
		return "—"
	}
	lo, hi := minOf(rs, f), maxOf(rs, f)
	if strconv.FormatFloat(lo, 'f', prec, 64) == strconv.FormatFloat(hi, 'f', prec, 64) {
		return strconv.FormatFloat(lo, 'f', prec, 64)
	}
	return strconv.FormatFloat(lo, 'f', prec, 64) + "–" + strconv.FormatFloat(hi, 'f', prec, 64)
}

func ratio(p, q []rec) string {
	if len(p) == 0 || len(q) == 0 {
		return "—"
	}
	return fmt.Sprintf("**%.1f×**", mean(p, rpsOf)/mean(q, rpsOf))
}

func lat(rs []rec) string {
	if len(rs) == 0 {
		return "—"
	}
	return rng(rs, func(r rec) float64 { return r.P50 }, 2) + " / " + rng(rs, func(r rec) float64 { return r.P99 }, 2) + " / " + rng(rs, func(r rec) float64 { return r.P999 }, 2)
}

// goBench is one benchmark's results over the -count runs: unit → values.
type goBench struct {
	name string
	vals map[string][]float64
}

func (g goBench) minOf(unit string) float64 {
	if len(g.vals[unit]) == 0 {
		return 0
	}
	return slices.Min(g.vals[unit])
}

func (g goBench) rng(unit string, prec int) string {
	vs := g.vals[unit]
	if len(vs) == 0 {
		return "—"
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	a, b := strconv.FormatFloat(lo, 'f', prec, 64), strconv.FormatFloat(hi, 'f', prec, 64)
	if a == b {
		return a
	}
	return a + "–" + b
}

func parseGoBench(s string) []goBench {
	var out []goBench
	idx := map[string]int{}
	for _, l := range strings.Split(s, "\n") {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		i, ok := idx[m[1]]
		if !ok {
			i = len(out)
			idx[m[1]] = i
			out = append(out, goBench{name: m[1], vals: map[string][]float64{}})
		}
		f := strings.Fields(m[3])
		for j := 0; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				out[i].vals[f[j+1]] = append(out[i].vals[f[j+1]], v)
			}
		}
	}
	return out
}

// byLabel groups runs by label: the labels in order of first appearance, and each
// label's runs in order.
func byLabel(rs []rec) ([]string, map[string][]rec) {
	var labels []string
	by := map[string][]rec{}
	for _, r := range rs {
		if _, ok := by[r.Label]; !ok {
			labels = append(labels, r.Label)
		}
		by[r.Label] = append(by[r.Label], r)
	}
	return labels, by
}
