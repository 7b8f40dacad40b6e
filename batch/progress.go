package batch

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress reports a batch: on a terminal (live) a line rewritten in place, with one line
// per finished run above it; otherwise one plain line per finished run.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	live     bool
	total    int // runs to do in this invocation
	skipped  int // finished runs kept from before (--resume)
	done     int
	running  int
	failed   int
	started  time.Time
	stopTick chan struct{}
	ticked   sync.WaitGroup
}

func newProgress(w io.Writer, live bool, total, skipped int) *progress {
	return &progress{w: w, live: live, total: total, skipped: skipped}
}

func (p *progress) start() {
	p.mu.Lock()
	p.started = time.Now()
	if p.skipped > 0 {
		fmt.Fprintf(p.w, "pab run: %d runs finished before are kept (--resume)\n", p.skipped)
	}
	fmt.Fprintf(p.w, "pab run: %d runs to do\n", p.total)
	p.mu.Unlock()
	if !p.live {
		return
	}
	p.stopTick = make(chan struct{})
	p.ticked.Add(1)
	go func() {
		defer p.ticked.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stopTick:
				return
			case <-t.C:
				p.mu.Lock()
				p.drawLocked()
				p.mu.Unlock()
			}
		}
	}()
}

func (p *progress) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running++
	if p.live {
		p.drawLocked()
	}
}

func (p *progress) end(j job, in *Info) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running--
	p.done++
	if isFailure(in.Status) {
		p.failed++
	}
	line := fmt.Sprintf("[%d/%d] %s #%d: %s", p.done, p.total, j.task, j.repeat, in.Status)
	if in.Score != nil {
		line += fmt.Sprintf(", score %.3g", *in.Score)
	}
	if in.NoBrowsing && in.Status != StatusNoBrowsing {
		line += ", no page opened"
	}
	line += fmt.Sprintf(" (%.1fs)", float64(in.DurationMS)/1000)
	if in.Error != "" && (in.Status == StatusError || in.Status == StatusInterrupted) {
		line += ": " + in.Error
	}
	if p.live {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		p.drawLocked()
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// drawLocked rewrites the live line: done, running, failed, elapsed, ETA.
func (p *progress) drawLocked() {
	el := time.Since(p.started)
	eta := "?"
	if p.done > 0 {
		left := time.Duration(float64(el) / float64(p.done) * float64(p.total-p.done))
		eta = left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\033[Kpab run: %d/%d done, %d running, %d failed, elapsed %s, ETA %s",
		p.done, p.total, p.running, p.failed, el.Round(time.Second), eta)
}

func (p *progress) stop() {
	if p.live {
		close(p.stopTick)
		p.ticked.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "pab run: %d of %d runs done, %d failed, in %s\n", p.done, p.total, p.failed, time.Since(p.started).Round(time.Millisecond))
}

// isFailure reports whether a status counts as failed in the progress line: the run did
// not end with a graded answer.
func isFailure(status string) bool {
	switch status {
	case StatusError, StatusAgentFailed, StatusTimeout, StatusNoBrowsing, StatusNoAnswer, StatusAnswerTooLarge, StatusInterrupted:
		return true
	}
	return false
}
