package importer

// progress.go: the progress lines of a long import on stderr (docs/import.md "Progress").

import (
	"fmt"
	"io"
	"time"

	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/recording"
)

// importProgress writes the progress lines of one import to w: none before quiet has passed
// since the import began (a small import says nothing), then at most one every every
// (internal/progress's delays, $PAB_PROGRESS_AFTER and $PAB_PROGRESS_EVERY).
type importProgress struct {
	w            io.Writer
	start        time.Time
	last         time.Time
	phaseStart   time.Time
	phase        string
	now          func() time.Time
	quiet, every time.Duration
}

func newProgress(w io.Writer) *importProgress {
	p := &importProgress{w: w, now: time.Now}
	p.quiet, p.every = progress.Delays()
	p.start = p.now()
	return p
}

// due says whether a line may be written now (and, when it may, counts it as written).
func (p *importProgress) due(force bool) bool {
	t := p.now()
	if t.Sub(p.start) < p.quiet || (!force && t.Sub(p.last) < p.every) {
		return false
	}
	p.last = t
	return true
}

// step says that the import has begun step what (packing, the audit, ...), once it has run
// for quiet.
func (p *importProgress) step(what string) {
	if p.due(true) {
		fmt.Fprintf(p.w, "pab import: %s (%s in)\n", what, p.elapsed())
	}
}

func (p *importProgress) elapsed() string { return p.now().Sub(p.start).Round(time.Second).String() }

// report is recording.ImportOptions.Progress: records and bytes read with their rate and the
// time left while the inputs are read, exchanges written while the bundle is written.
func (p *importProgress) report(ip recording.ImportProgress) {
	t := p.now()
	if ip.Phase != p.phase {
		p.phase, p.phaseStart = ip.Phase, t
	}
	if !p.due(false) {
		return
	}
	secs := t.Sub(p.phaseStart).Seconds()
	switch ip.Phase {
	case "read":
		line := fmt.Sprintf("pab import: reading: %d records", ip.Records)
		if secs > 0 {
			line += fmt.Sprintf(" (%.0f/s)", float64(ip.Records)/secs)
		}
		if ip.Read >= 0 && ip.Size > 0 {
			line += fmt.Sprintf(", %.1f of %.1f MB (%.0f%%)", float64(ip.Read)/1e6, float64(ip.Size)/1e6, 100*float64(ip.Read)/float64(ip.Size))
			if secs > 0 && ip.Read > 0 {
				rate := float64(ip.Read) / secs
				line += fmt.Sprintf(", %.1f MB/s, about %s left", rate/1e6, eta(float64(ip.Size-ip.Read)/rate))
			}
		}
		fmt.Fprintf(p.w, "%s (%s in)\n", line, p.elapsed())
	case "write":
		line := fmt.Sprintf("pab import: writing: %d of %d exchanges", ip.Written, ip.Total)
		if secs > 0 && ip.Written > 0 {
			rate := float64(ip.Written) / secs
			line += fmt.Sprintf(" (%.0f/s, about %s left)", rate, eta(float64(ip.Total-ip.Written)/rate))
		}
		fmt.Fprintf(p.w, "%s (%s in)\n", line, p.elapsed())
	}
}

// eta renders a number of seconds left, rounded to the second.
func eta(secs float64) string {
	return (time.Duration(secs) * time.Second).String()
}
