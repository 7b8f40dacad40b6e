package har

import (
	"encoding/json"
	"fmt"
	"io"
)

// Validate checks that the HAR read from r has every field HAR 1.2 requires, of the type
// it requires (the spec's "log", "creator", "pages", "entries", "request", "response",
// "cookies", "headers", "queryString", "postData", "content", "cache" and "timings"
// objects), and returns one line per problem ("log.entries[3].response.content: no
// mimeType"). It decodes the whole file: it is for checking what pab writes, not for
// reading large captures (Reader is).
func Validate(r io.Reader) ([]string, error) {
	var doc map[string]any
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	v := &validator{}
	log := v.obj(doc, "", "log")
	if log == nil {
		return v.probs, nil
	}
	v.str(log, "log", "version")
	if c := v.obj(log, "log", "creator"); c != nil {
		v.str(c, "log.creator", "name")
		v.str(c, "log.creator", "version")
	}
	if b, ok := log["browser"].(map[string]any); ok {
		v.str(b, "log.browser", "name")
		v.str(b, "log.browser", "version")
	}
	if pages, ok := log["pages"]; ok {
		ps, ok := pages.([]any)
		if !ok {
			v.add("log.pages", "not an array")
		}
		for i, p := range ps {
			at := fmt.Sprintf("log.pages[%d]", i)
			pm, ok := p.(map[string]any)
			if !ok {
				v.add(at, "not an object")
				continue
			}
			v.str(pm, at, "startedDateTime")
			v.str(pm, at, "id")
			v.str(pm, at, "title")
			v.obj(pm, at, "pageTimings")
		}
	}
	for i, e := range v.arr(log, "log", "entries") {
		at := fmt.Sprintf("log.entries[%d]", i)
		em, ok := e.(map[string]any)
		if !ok {
			v.add(at, "not an object")
			continue
		}
		v.str(em, at, "startedDateTime")
		v.num(em, at, "time")
		v.obj(em, at, "cache")
		if t := v.obj(em, at, "timings"); t != nil {
			for _, k := range []string{"send", "wait", "receive"} {
				v.num(t, at+".timings", k)
			}
		}
		if q := v.obj(em, at, "request"); q != nil {
			qa := at + ".request"
			v.str(q, qa, "method")
			v.str(q, qa, "url")
			v.str(q, qa, "httpVersion")
			v.pairs(q, qa, "cookies")
			v.pairs(q, qa, "headers")
			v.pairs(q, qa, "queryString")
			v.num(q, qa, "headersSize")
			v.num(q, qa, "bodySize")
			if pd, ok := q["postData"]; ok {
				pm, ok := pd.(map[string]any)
				if !ok {
					v.add(qa+".postData", "not an object")
				} else {
					v.str(pm, qa+".postData", "mimeType")
					_, hasText := pm["text"]
					_, hasParams := pm["params"]
					if !hasText && !hasParams {
						v.add(qa+".postData", "neither text nor params")
					}
				}
			}
		}
		if s := v.obj(em, at, "response"); s != nil {
			sa := at + ".response"
			v.num(s, sa, "status")
			v.str(s, sa, "statusText")
			v.str(s, sa, "httpVersion")
			v.pairs(s, sa, "cookies")
			v.pairs(s, sa, "headers")
			v.str(s, sa, "redirectURL")
			v.num(s, sa, "headersSize")
			v.num(s, sa, "bodySize")
			if c := v.obj(s, sa, "content"); c != nil {
				v.num(c, sa+".content", "size")
				v.str(c, sa+".content", "mimeType")
			}
		}
	}
	return v.probs, nil
}

type validator struct{ probs []string }

func (v *validator) add(at, msg string) { v.probs = append(v.probs, at+": "+msg) }

func (v *validator) obj(m map[string]any, at, k string) map[string]any {
	x, ok := m[k]
	if !ok {
		v.add(at, "no "+k)
		return nil
	}
	o, ok := x.(map[string]any)
	if !ok {
		v.add(at+"."+k, "not an object")
	}
	return o
}

func (v *validator) arr(m map[string]any, at, k string) []any {
	x, ok := m[k]
	if !ok {
		v.add(at, "no "+k)
		return nil
	}
	a, ok := x.([]any)
	if !ok {
		v.add(at+"."+k, "not an array")
	}
	return a
}

func (v *validator) str(m map[string]any, at, k string) {
	x, ok := m[k]
	if !ok {
		v.add(at, "no "+k)
	} else if _, ok := x.(string); !ok {
		v.add(at+"."+k, "not a string")
	}
}

func (v *validator) num(m map[string]any, at, k string) {
	x, ok := m[k]
	if !ok {
		v.add(at, "no "+k)
	} else if _, ok := x.(json.Number); !ok {
		v.add(at+"."+k, "not a number")
	}
}

// pairs checks an array of objects with a string name and value (headers, cookies,
// queryString items).
func (v *validator) pairs(m map[string]any, at, k string) {
	for i, x := range v.arr(m, at, k) {
		o, ok := x.(map[string]any)
		ia := fmt.Sprintf("%s.%s[%d]", at, k, i)
		if !ok {
			v.add(ia, "not an object")
			continue
		}
		v.str(o, ia, "name")
		v.str(o, ia, "value")
	}
}
