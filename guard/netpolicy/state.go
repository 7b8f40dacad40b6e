package netpolicy

import (
	"slices"
	"sync"
)

// Layers that enforce a Policy (the trace's detail.basis of a refusal).
const (
	LayerPage    = "page"    // the page-side submit lock (an early, explainable refusal only)
	LayerNetwork = "network" // the browser's network layer: DevTools Fetch holds (guard/devtools)
	LayerWire    = "wire"    // the MITM gate every browser request passes (guard/gate)
)

// Refusal is one refused request, as a Policy reports it to its OnRefuse function. It
// carries no URL beyond its host, so that no typed value ever reaches the trace.
type Refusal struct {
	Layer   string // LayerNetwork or LayerWire
	Host    string
	Method  string
	Verdict Verdict
	// Navigation: a frame's document load was refused (the frame stayed where it was).
	Navigation bool
	WebSocket  bool
	// Kind is what the layer knows of the request's origin (DevTools resource type such as
	// "Image", "Ping", "Document"; "" at the wire).
	Kind string
}

// Policy is a run's facts and Decide over them, shared by both layers. Safe for concurrent
// use. The zero value is not usable: make one with New.
type Policy struct {
	mu       sync.Mutex
	mode     string
	sites    []string
	typed    []string
	forms    []Form
	armed    map[string]bool // layer -> one approved submit not yet used there
	released bool
	onRefuse func(Refusal)
}

// New returns the Policy of a run in mode (ModeFillAndReview or ModeAutoSubmit) on sites.
// onRefuse, when not nil, is called (outside the Policy's lock, on the deciding goroutine)
// for every refusal.
func New(mode string, sites []string, onRefuse func(Refusal)) *Policy {
	return &Policy{mode: mode, sites: slices.Clone(sites), armed: map[string]bool{}, onRefuse: onRefuse}
}

// AddTyped adds a value filled in this run (call it before the value reaches the page: the
// page may send it from its input event). Values folding to "" and values past MaxTyped are
// ignored.
func (p *Policy) AddTyped(v string) {
	f := Fold(v)
	if f == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.typed) < MaxTyped && !slices.Contains(p.typed, f) {
		p.typed = append(p.typed, f)
	}
}

// HasTyped reports whether any value has been typed in this run.
func (p *Policy) HasTyped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.typed) > 0
}

// AddForms adds forms seen on a page; only POST forms with an action and a field name are
// kept, the latest MaxForms of them.
func (p *Policy) AddForms(forms []Form) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range forms {
		if f.Method != "post" || f.Action == "" || len(f.Fields) == 0 {
			continue
		}
		if i := slices.IndexFunc(p.forms, func(g Form) bool { return g.Action == f.Action }); i >= 0 {
			for _, n := range f.Fields {
				if !slices.Contains(p.forms[i].Fields, n) && len(p.forms[i].Fields) < 512 {
					p.forms[i].Fields = append(p.forms[i].Fields, n)
				}
			}
			continue
		}
		if len(p.forms) >= MaxForms {
			p.forms = p.forms[1:]
		}
		p.forms = append(p.forms, Form{Action: f.Action, Method: f.Method, Fields: slices.Clone(f.Fields)})
	}
}

// Arm approves one submit: each layer (network, wire) lets one request with another method
// than GET, HEAD or OPTIONS to the application's sites pass, once. Only under auto_submit.
func (p *Policy) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed[LayerNetwork] = true
	p.armed[LayerWire] = true
}

// Disarm withdraws an approval not used yet (the guard's wait for the submit is over).
func (p *Policy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.armed)
}

// Release lifts every hold: the owner has the browser to review and submit in.
func (p *Policy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = true
}

// Released reports whether Release was called.
func (p *Policy) Released() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// Facts returns the facts Decide sees now at layer.
func (p *Policy) Facts(layer string) Facts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Facts{Mode: p.mode, Sites: p.sites, Typed: slices.Clone(p.typed), Forms: slices.Clone(p.forms), Armed: p.armed[layer], Released: p.released}
}

// Decide decides r at layer with the facts of the moment, uses the layer's approval up when
// the verdict needs it, and reports a refusal to onRefuse. kind is the layer's name for the
// request's type (Refusal.Kind).
func (p *Policy) Decide(layer string, r Request, kind string) Verdict {
	p.mu.Lock()
	f := Facts{Mode: p.mode, Sites: p.sites, Typed: p.typed, Forms: p.forms, Armed: p.armed[layer], Released: p.released}
	v := Decide(r, f)
	if v.UsesArm {
		delete(p.armed, layer)
	}
	p.mu.Unlock()
	if !v.Allow && p.onRefuse != nil {
		p.onRefuse(Refusal{Layer: layer, Host: hostOf(r.URL), Method: r.Method, Verdict: v, Navigation: r.Navigation, WebSocket: r.WebSocket, Kind: kind})
	}
	return v
}
