package importer

// progress.go: the progress lines of a long import on stderr (docs/import.md "Progress"),
// one internal/progress Meter per step.

import (
	"io"

	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/recording"
)

// importProgress reports the steps of one import on w, each with its own progress.Meter
// (internal/progress's delays, $PAB_PROGRESS_AFTER and $PAB_PROGRESS_EVERY): nothing for a
// step shorter than the first delay, then a line every few seconds with what is done, the
// rates and, when the step's total is known, the time left, and a closing line. Beginning
// a step ends the one before. Its methods are called from the importing goroutine.
type importProgress struct {
	w     io.Writer
	cur   *progress.Meter
	phase string // recording.ImportProgress.Phase of cur, "" for a step begun with begin
	start func(w io.Writer, what string, total progress.Totals) *progress.Meter
}

func newProgress(w io.Writer) *importProgress {
	return &importProgress{w: w, start: func(w io.Writer, what string, total progress.Totals) *progress.Meter {
		return progress.Start(w, what, total, 0, 0)
	}}
}

// begin ends the current step and begins step what ("packing the recording") with its
// totals, when known; the meter it returns counts it (progress.NewContext hands it to the
// code doing the step).
func (p *importProgress) begin(what string, total progress.Totals) *progress.Meter {
	p.end()
	p.cur = p.start(p.w, "pab import: "+what, total)
	return p.cur
}

// end ends the current step, if any, with its closing line.
func (p *importProgress) end() {
	p.cur.Stop()
	p.cur, p.phase = nil, ""
}

// report is recording.ImportOptions.Progress: the records and bytes read of the inputs while
// they are read, the exchanges written while the bundle is written.
func (p *importProgress) report(ip recording.ImportProgress) {
	if ip.Phase != p.phase || p.cur == nil {
		switch ip.Phase {
		case "read":
			p.begin("reading the input", progress.Totals{Bytes: max(ip.Size, 0)})
		case "write":
			p.begin("writing the bundle", progress.Totals{Records: int64(ip.Total), Unit: "exchanges"})
		default:
			return
		}
		p.phase = ip.Phase
	}
	switch ip.Phase {
	case "read":
		p.cur.Set(int64(ip.Records), max(ip.Read, 0))
	case "write":
		p.cur.Set(int64(ip.Written), 0)
	}
}
