package batch

// This file takes the run view's screenshots over CDP (chromedp), from the run's own
// Chromium, attached to the page the agent's browser MCP server drives.

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

// cdpShooter holds one CDP connection to a run's browser.
type cdpShooter struct {
	browserCtx context.Context
	cancel     func()
}

func newCDPShooter(cdp string) *cdpShooter {
	actx, c1 := remote.NewAllocator(context.Background(), cdp, remote.NoModifyURL)
	bctx, c2 := chromedp.NewContext(actx)
	return &cdpShooter{browserCtx: bctx, cancel: func() { c2(); c1() }}
}

func (s *cdpShooter) close() { s.cancel() }

// shot is one screenshot: the page's URL and title, and the JPEG (nil, with note, when it
// did not fit the bounds).
type shot struct {
	url, title string
	jpeg       []byte
	note       string
}

// pickPage is the page target a step acted on: the page at hint (the "Page URL:" the
// browser server's answer names) when there is one, else the first page that is not
// about:blank in the browser's list, else any page.
func pickPage(ts []*target.Info, hint string) *target.Info {
	if hint != "" {
		for _, t := range ts {
			if t.Type == "page" && t.URL == hint {
				return t
			}
		}
	}
	var blank *target.Info
	for _, t := range ts {
		if t.Type != "page" {
			continue
		}
		if t.URL != "about:blank" && t.URL != "" {
			return t
		}
		if blank == nil {
			blank = t
		}
	}
	return blank
}

// shoot takes a JPEG of the page's viewport (quality 60, scaled to at most maxShotWidth CSS
// pixels wide; quality 30 and then half the scale when over maxShotBytes), with its URL
// and title, within shotTimeout.
func (s *cdpShooter) shoot(ctx context.Context, hint string) (*shot, error) {
	ctx, cancel := context.WithTimeout(ctx, shotTimeout)
	defer cancel()
	// the connection's own context must outlive this call; bound it by ctx here
	ts, err := runBounded(ctx, func() ([]*target.Info, error) { return chromedp.Targets(s.browserCtx) })
	if err != nil {
		return nil, fmt.Errorf("list pages: %v", err)
	}
	p := pickPage(ts, hint)
	if p == nil {
		return nil, errors.New("the browser has no page")
	}
	tctx, tcancel := chromedp.NewContext(s.browserCtx, chromedp.WithTargetID(p.TargetID), chromedp.WithDetachOnCancel())
	defer tcancel()
	out := &shot{}
	_, err = runBounded(ctx, func() (struct{}, error) {
		var err error
		if out.url, err = chromedp.Run(tctx, chromedp.Location()); err != nil {
			return struct{}{}, err
		}
		if out.title, err = chromedp.Run(tctx, chromedp.Title()); err != nil {
			return struct{}{}, err
		}
		lm, err := chromedp.Call(tctx, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return struct{}{}, err
		}
		css := lm.CSSVisualViewport
		if css == nil {
			return struct{}{}, errors.New("the page has no viewport")
		}
		w, h := css.ClientWidth, css.ClientHeight
		if w <= 0 || h <= 0 || math.IsNaN(w) {
			return struct{}{}, errors.New("the page has no viewport")
		}
		scale := 1.0
		if w > maxShotWidth {
			scale = maxShotWidth / w
		}
		for _, try := range []struct {
			q     int64
			scale float64
		}{{60, scale}, {30, scale}, {30, scale / 2}} {
			q := try.q
			res, err := chromedp.Call(tctx, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatJpeg,
				Quality: &q, Clip: &page.Viewport{X: css.PageX, Y: css.PageY, Width: w, Height: h, Scale: try.scale}})
			if err != nil {
				return struct{}{}, err
			}
			if len(res.Data) <= maxShotBytes {
				out.jpeg = res.Data
				return struct{}{}, nil
			}
		}
		out.note = fmt.Sprintf("no screenshot: over %d KiB even at quality 30 and half scale", maxShotBytes>>10)
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runBounded runs f, giving up when ctx ends first (f's CDP calls go on in the
// connection's context and are dropped).
func runBounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return zero, fmt.Errorf("over %s", shotTimeout)
		}
		return zero, ctx.Err()
	}
}
