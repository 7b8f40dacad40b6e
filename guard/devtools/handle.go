package devtools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/pab-dev/pab/internal/cdpconn"
)

// Handle is one element held in the guard's isolated world of one frame: the probes read
// it, and read it again after an action, without asking the page's world anything.
type Handle struct {
	session, objectID string
}

// Valid reports whether h holds an element.
func (h Handle) Valid() bool { return h.objectID != "" }

// findTaggedJS finds the element carrying attribute @ATTR@ in the document and its open
// shadow roots (depth first, in the isolated world), removes the attribute and returns the
// element; null when none does.
const findTaggedJS = `(() => {
  const a = @ATTR@;
  const get = (C, p) => Object.getOwnPropertyDescriptor(C.prototype, p).get;
  const shadow = get(Element, "shadowRoot");
  const visit = (root, depth) => {
    if (depth > 20) return null;
    const el = root.querySelector("[" + a + "]");
    if (el) return el;
    for (const x of root.querySelectorAll("*")) { const s = shadow.call(x); if (s) { const f = visit(s, depth + 1); if (f) return f; } }
    return null;
  };
  const el = visit(document, 0);
  if (el) Element.prototype.removeAttribute.call(el, a);
  return el;
})()`

// FindTagged finds, in every frame of every attached page, the element a page-world step
// marked with the attribute attr (a name no page can guess: "data-pab-" and a random
// token), takes the mark off, and returns the element as a Handle of the isolated world.
// Errors: the session is lost, or no frame holds such an element.
func (s *Session) FindTagged(ctx context.Context, attr string) (Handle, error) {
	if err := s.Err(); err != nil {
		return Handle{}, err
	}
	q, _ := json.Marshal(attr)
	expr := strings.Replace(findTaggedJS, "@ATTR@", string(q), 1)
	for _, t := range s.pages(true) {
		frames, err := s.frames(ctx, t.session)
		if err != nil {
			continue
		}
		for _, f := range frames {
			id, err := s.isolatedContext(ctx, t.session, f.ID)
			if err != nil {
				continue
			}
			res, err := s.Call(ctx, t.session, "Runtime.evaluate", map[string]any{"expression": expr, "contextId": id, "returnByValue": false, "timeout": 5000})
			if err != nil {
				continue
			}
			if _, obj, err := cdpconn.RuntimeResult("Runtime.evaluate", res); err == nil && obj.Subtype == "node" && obj.ObjectID != "" {
				return Handle{session: t.session, objectID: obj.ObjectID}, nil
			}
		}
	}
	return Handle{}, errors.New("devtools: no element carries the guard's mark (the page removed it, or the element is in a closed shadow root)")
}

// CallOn runs fn, a JavaScript function declaration whose first parameter is the element
// and whose further parameters are args (JSON values), on h in the isolated world, and
// returns its value as JSON (at most 1 MiB). Errors: the session is lost, the element's
// document is gone, or fn threw.
func (s *Session) CallOn(ctx context.Context, h Handle, fn string, args ...any) (json.RawMessage, error) {
	if !h.Valid() {
		return nil, errors.New("devtools: no element")
	}
	callArgs := []map[string]any{{"objectId": h.objectID}}
	for _, a := range args {
		callArgs = append(callArgs, map[string]any{"value": a})
	}
	res, err := s.Call(ctx, h.session, "Runtime.callFunctionOn", map[string]any{
		"functionDeclaration": "function (el, ...args) { return (" + fn + ")(el, ...args); }",
		"objectId":            h.objectID, "arguments": callArgs, "returnByValue": true})
	if err != nil {
		return nil, err
	}
	v, _, err := cdpconn.RuntimeResult("Runtime.callFunctionOn", res)
	return v, err
}

// Release lets the isolated world drop h's element.
func (s *Session) Release(h Handle) {
	if h.Valid() {
		s.send(h.session, "Runtime.releaseObject", map[string]any{"objectId": h.objectID})
	}
}
