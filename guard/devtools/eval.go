package devtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pab-dev/pab/internal/cdpconn"
)

// WorldName is the name of the isolated world the guard's probes run in.
const WorldName = "pab-guard"

// FrameValue is one frame's answer to Evaluate: the target and frame it ran in, the frame's
// URL, and the expression's value as JSON.
type FrameValue struct {
	TargetID, FrameID, URL string
	Value                  json.RawMessage
}

// Evaluate runs expression (JavaScript whose value JSON can carry) in an isolated world
// (Page.createIsolatedWorld) of every frame of every attached page and out-of-process
// frame, so that nothing the page's own scripts changed (prototypes, globals, getters)
// reaches it: it reads the DOM itself. It returns one value per frame that answered (a frame
// that throws, or answers more than 1 MiB, is left out). Errors: the session is lost, or no
// frame answered.
func (s *Session) Evaluate(ctx context.Context, expression string) ([]FrameValue, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	var out []FrameValue
	var firstErr error
	for _, t := range s.pages(true) {
		frames, err := s.frames(ctx, t.session)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, f := range frames {
			v, err := s.evalIn(ctx, t.session, f.ID, expression)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			out = append(out, FrameValue{TargetID: t.id, FrameID: f.ID, URL: f.URL, Value: v})
		}
	}
	if len(out) == 0 {
		if firstErr == nil {
			firstErr = errors.New("no page is open")
		}
		return nil, fmt.Errorf("devtools: evaluate: %w", firstErr)
	}
	return out, nil
}

// frame is one frame of a target's frame tree.
type frame struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// frameTree is Page.getFrameTree's tree.
type frameTree struct {
	Frame       frame       `json:"frame"`
	ChildFrames []frameTree `json:"childFrames"`
}

// frames lists the frames of the target at session (depth first, at most 256).
func (s *Session) frames(ctx context.Context, session string) ([]frame, error) {
	res, err := s.Call(ctx, session, "Page.getFrameTree", nil)
	if err != nil {
		return nil, err
	}
	var v struct {
		FrameTree frameTree `json:"frameTree"`
	}
	if err := json.Unmarshal(res, &v); err != nil {
		return nil, fmt.Errorf("Page.getFrameTree: %w", err)
	}
	var out []frame
	var walk func(t frameTree)
	walk = func(t frameTree) {
		if len(out) >= 256 {
			return
		}
		out = append(out, t.Frame)
		for _, c := range t.ChildFrames {
			walk(c)
		}
	}
	walk(v.FrameTree)
	return out, nil
}

// evalIn runs expression in a new isolated world of frame frameID of the target at session.
func (s *Session) evalIn(ctx context.Context, session, frameID, expression string) (json.RawMessage, error) {
	id, err := s.isolatedContext(ctx, session, frameID)
	if err != nil {
		return nil, err
	}
	res, err := s.Call(ctx, session, "Runtime.evaluate", map[string]any{"expression": expression, "contextId": id, "returnByValue": true, "timeout": 5000})
	if err != nil {
		return nil, err
	}
	v, _, err := cdpconn.RuntimeResult("Runtime.evaluate", res)
	return v, err
}

// isolatedContext makes an isolated world (WorldName) in frame frameID of the target at
// session and returns its execution context id.
func (s *Session) isolatedContext(ctx context.Context, session, frameID string) (int64, error) {
	res, err := s.Call(ctx, session, "Page.createIsolatedWorld", map[string]any{"frameId": frameID, "worldName": WorldName})
	if err != nil {
		return 0, err
	}
	var w struct {
		ExecutionContextID int64 `json:"executionContextId"`
	}
	if err := json.Unmarshal(res, &w); err != nil || w.ExecutionContextID == 0 {
		return 0, fmt.Errorf("Page.createIsolatedWorld: no context (%v)", err)
	}
	return w.ExecutionContextID, nil
}
