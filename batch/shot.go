package batch

// This file takes the run view's screenshots over CDP (internal/cdpconn), from the run's own
// Chromium, attached to the page the agent's browser MCP server drives.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/pab-dev/pab/internal/cdpconn"
)

// cdpShooter holds one CDP connection to a run's browser, made at the first shot (and again
// after it was lost).
type cdpShooter struct {
	url  string // the browser's DevTools websocket
	conn *cdpconn.Conn
}

func newCDPShooter(cdp string) *cdpShooter { return &cdpShooter{url: cdp} }

func (s *cdpShooter) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

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
func pickPage(ts []cdpconn.TargetInfo, hint string) *cdpconn.TargetInfo {
	if hint != "" {
		for i, t := range ts {
			if t.Type == "page" && t.URL == hint {
				return &ts[i]
			}
		}
	}
	var blank *cdpconn.TargetInfo
	for i, t := range ts {
		if t.Type != "page" {
			continue
		}
		if t.URL != "about:blank" && t.URL != "" {
			return &ts[i]
		}
		if blank == nil {
			blank = &ts[i]
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
	out, err := s.shootIn(ctx, hint)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("over %s", shotTimeout)
	}
	return out, err
}

func (s *cdpShooter) shootIn(ctx context.Context, hint string) (*shot, error) {
	if s.conn != nil && s.conn.Err() != nil {
		s.close()
	}
	if s.conn == nil {
		c, err := cdpconn.Dial(ctx, s.url, cdpconn.Options{CallTimeout: shotTimeout})
		if err != nil {
			return nil, err
		}
		s.conn = c
	}
	ts, err := s.conn.Targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pages: %v", err)
	}
	p := pickPage(ts, hint)
	if p == nil {
		return nil, errors.New("the browser has no page")
	}
	// a session of our own on the page: it enables nothing, so the page is not changed
	session, err := s.conn.Attach(ctx, p.TargetID)
	if err != nil {
		return nil, err
	}
	defer s.conn.Detach(session)
	out := &shot{}
	var loc struct{ URL, Title string }
	if err := s.conn.Evaluate(ctx, session, `({URL: location.href, Title: document.title})`, &loc); err != nil {
		return nil, err
	}
	out.url, out.title = loc.URL, loc.Title
	res, err := s.conn.Call(ctx, session, "Page.getLayoutMetrics", nil)
	if err != nil {
		return nil, err
	}
	var lm struct {
		CSS *struct {
			PageX, PageY              float64
			ClientWidth, ClientHeight float64
		} `json:"cssVisualViewport"`
	}
	if err := json.Unmarshal(res, &lm); err != nil || lm.CSS == nil {
		return nil, errors.New("the page has no viewport")
	}
	css := lm.CSS
	w, h := css.ClientWidth, css.ClientHeight
	if w <= 0 || h <= 0 || math.IsNaN(w) || math.IsNaN(h) {
		return nil, errors.New("the page has no viewport")
	}
	scale := 1.0
	if w > maxShotWidth {
		scale = maxShotWidth / w
	}
	for _, try := range []struct {
		q     int
		scale float64
	}{{60, scale}, {30, scale}, {30, scale / 2}} {
		res, err := s.conn.Call(ctx, session, "Page.captureScreenshot", map[string]any{"format": "jpeg", "quality": try.q,
			"clip": map[string]any{"x": css.PageX, "y": css.PageY, "width": w, "height": h, "scale": try.scale}})
		if err != nil {
			return nil, err
		}
		var shot struct {
			Data string `json:"data"` // base64
		}
		if err := json.Unmarshal(res, &shot); err != nil {
			return nil, fmt.Errorf("Page.captureScreenshot: %v", err)
		}
		if base64.StdEncoding.DecodedLen(len(shot.Data)) > maxShotBytes+3 {
			continue
		}
		jpeg, err := base64.StdEncoding.DecodeString(shot.Data)
		if err != nil {
			return nil, fmt.Errorf("Page.captureScreenshot: %v", err)
		}
		if len(jpeg) <= maxShotBytes {
			out.jpeg = jpeg
			return out, nil
		}
	}
	out.note = fmt.Sprintf("no screenshot: over %d KiB even at quality 30 and half scale", maxShotBytes>>10)
	return out, nil
}
