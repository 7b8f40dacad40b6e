package meter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/jsonx"
)

// Usage is what a meter recorded: the totals and every call.
type Usage struct {
	Totals Totals `json:"totals"`
	Calls  []Call `json:"per_call"`
}

// tokens are a call's token counts as the API reported them.
type tokens struct {
	// InputTokens: Anthropic usage.input_tokens (the input not read from or written to the
	// cache); OpenAI usage.prompt_tokens (Chat Completions) or usage.input_tokens (Responses),
	// which include the cached tokens.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens: output_tokens / completion_tokens (reasoning tokens included).
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadTokens: Anthropic cache_read_input_tokens; OpenAI
	// prompt_tokens_details.cached_tokens / input_tokens_details.cached_tokens.
	CacheReadTokens int64 `json:"cache_read_tokens"`
	// CacheWriteTokens: Anthropic cache_creation_input_tokens (OpenAI: none, 0).
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CacheWrite1hTokens: of CacheWriteTokens, those written to Anthropic's 1-hour cache
	// (usage.cache_creation.ephemeral_1h_input_tokens), priced apart.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
}

// Call is one model call the meter forwarded.
type Call struct {
	// Time is when the request came in (UTC).
	Time time.Time `json:"time"`
	// Kind is the route it came by; API the format of the call (told by its path).
	Kind Kind `json:"kind"`
	API  API  `json:"api"`
	// Path is the path forwarded (after the kind), such as /v1/messages.
	Path string `json:"path"`
	// Tag is the call's TagHeader ("" for none): which run a judge's call graded.
	Tag string `json:"tag,omitempty"`
	// Model is the model the answer named ("" when it named none, as error answers).
	Model string `json:"model"`
	// Status is the HTTP status of the answer (502 when the upstream gave none).
	Status int `json:"status"`
	// Streamed is true for an answer in server-sent events.
	Streamed bool `json:"streamed"`
	// LatencyMS is the time from the request to the end of the answer, in milliseconds.
	LatencyMS int64 `json:"latency_ms"`
	tokens
	// Unreadable is true when the call's usage could not be read; Reason says why.
	Unreadable bool   `json:"unreadable,omitempty"`
	Reason     string `json:"unreadable_reason,omitempty"`
	// Refused is true for a request the meter answered itself and did not forward: a
	// protocol upgrade (WebSocket, Status 501), a body over Options.MaxRequest (413) or a
	// body that could not be read (400). It is not a model call (nothing was billed) and
	// counts in Totals.RefusedUpgrades (501) or Totals.RefusedRequests only.
	Refused bool `json:"refused,omitempty"`
	// CostUSD is the call's cost in US dollars (null when unknown: usage unreadable or model
	// not in the price table; 0 for an error answer, which is not billed); PricedAs is the
	// price table's name it was priced as.
	CostUSD  *float64 `json:"cost_usd"`
	PricedAs string   `json:"priced_as,omitempty"`
}

// Totals sum the calls of a run (or, with Add, of a batch).
type Totals struct {
	// Calls counts the model calls, answered or not (refused upgrades left out).
	Calls int `json:"calls"`
	// The token sums, over the calls whose usage was read (see tokens for what each counts;
	// input_tokens adds Anthropic's uncached input to OpenAI's input with its cached part).
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CostUSD is the total cost in US dollars, or null when any call's cost is unknown
	// (UnreadableCalls or UnpricedCalls not 0): never a partial sum passed off as the total.
	CostUSD *float64 `json:"cost_usd"`
	// KnownCostUSD is the sum over the calls whose cost is known: the total when CostUSD is
	// set, a lower bound when it is null.
	KnownCostUSD float64 `json:"known_cost_usd"`
	// UnreadableCalls counts the calls whose usage could not be read.
	UnreadableCalls int `json:"unreadable_calls"`
	// UnpricedCalls counts the calls read whose model has no price; UnpricedModels names
	// those models.
	UnpricedCalls  int      `json:"unpriced_calls"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
	// ErrorCalls counts the calls answered with a status other than 2xx (not billed).
	ErrorCalls int `json:"error_calls"`
	// StreamedCalls counts the calls answered in server-sent events.
	StreamedCalls int `json:"streamed_calls"`
	// RefusedUpgrades counts the WebSocket upgrades refused (see the package comment).
	RefusedUpgrades int `json:"refused_upgrades,omitempty"`
	// RefusedRequests counts the other requests refused, never forwarded: a body over
	// Options.MaxRequest or one that could not be read.
	RefusedRequests int `json:"refused_requests,omitempty"`
}

// Sum totals calls.
func Sum(calls []Call) Totals {
	var t Totals
	known := true
	models := map[string]bool{}
	for i := range calls {
		c := &calls[i]
		if c.Refused {
			if c.Status == http.StatusNotImplemented {
				t.RefusedUpgrades++
			} else {
				t.RefusedRequests++
			}
			continue
		}
		t.Calls++
		if c.Streamed {
			t.StreamedCalls++
		}
		if c.Status/100 != 2 {
			t.ErrorCalls++
		}
		if c.Unreadable {
			t.UnreadableCalls++
			known = false
			continue
		}
		t.InputTokens += c.InputTokens
		t.OutputTokens += c.OutputTokens
		t.CacheReadTokens += c.CacheReadTokens
		t.CacheWriteTokens += c.CacheWriteTokens
		if c.CostUSD == nil {
			t.UnpricedCalls++
			models[c.Model] = true
			known = false
			continue
		}
		t.KnownCostUSD += *c.CostUSD
	}
	for m := range models {
		t.UnpricedModels = append(t.UnpricedModels, m)
	}
	sort.Strings(t.UnpricedModels)
	if known {
		v := t.KnownCostUSD
		t.CostUSD = &v
	}
	return t
}

// Add returns the totals of t and o together (a batch's totals from its runs'): the cost is
// known only when both are.
func (t Totals) Add(o Totals) Totals {
	r := Totals{
		Calls: t.Calls + o.Calls, InputTokens: t.InputTokens + o.InputTokens, OutputTokens: t.OutputTokens + o.OutputTokens,
		CacheReadTokens: t.CacheReadTokens + o.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens + o.CacheWriteTokens,
		KnownCostUSD: t.KnownCostUSD + o.KnownCostUSD, UnreadableCalls: t.UnreadableCalls + o.UnreadableCalls,
		UnpricedCalls: t.UnpricedCalls + o.UnpricedCalls, ErrorCalls: t.ErrorCalls + o.ErrorCalls,
		StreamedCalls: t.StreamedCalls + o.StreamedCalls, RefusedUpgrades: t.RefusedUpgrades + o.RefusedUpgrades,
		RefusedRequests: t.RefusedRequests + o.RefusedRequests,
	}
	if t.CostUSD != nil && o.CostUSD != nil {
		v := *t.CostUSD + *o.CostUSD
		r.CostUSD = &v
	}
	seen := map[string]bool{}
	for _, m := range append(append([]string(nil), t.UnpricedModels...), o.UnpricedModels...) {
		if !seen[m] {
			seen[m] = true
			r.UnpricedModels = append(r.UnpricedModels, m)
		}
	}
	sort.Strings(r.UnpricedModels)
	return r
}

// maxCount bounds a token count the meter believes (a hostile or broken upstream could send
// 9e18 and overflow the sums): about a trillion.
const maxCount = 1 << 40

// maxDepth bounds the nesting of the JSON decoded (jsonx.Depth).
const maxDepth = 256

// usageResult is what the parser read of one answer.
type usageResult struct {
	tokens
	model    string
	streamed bool
	// reason is why the usage could not be read ("" when it was).
	reason string
	// noAnswer: the upstream gave no answer (or none was read); the call may have been
	// billed all the same, so it is unreadable whatever its status.
	noAnswer bool
}

// usageParser reads the usage of one answer, fed its bytes as they pass (Write). It never
// keeps more than maxBody bytes (a JSON answer) or maxEvent bytes (one server-sent event),
// and keeps nothing of the answer once parsed but the numbers and the model name.
type usageParser struct {
	api      API
	sse      bool
	maxBody  int
	maxEvent int
	failed   string // first reason the usage cannot be read

	// JSON answer
	body []byte
	over bool

	// server-sent events
	line     []byte
	lineOver bool
	event    string
	data     []byte
	dataOver bool
	started  bool // Anthropic message_start read
	final    bool // the usage that ends the call was read
	ended    bool // the stream's last event was read (Chat Completions' [DONE], message_stop)
	skipped  string

	model string
	tok   tokens
}

func newUsageParser(api API, sse bool, maxBody, maxEvent int) *usageParser {
	return &usageParser{api: api, sse: sse, maxBody: maxBody, maxEvent: maxEvent}
}

func (p *usageParser) fail(reason string) {
	if p.failed == "" {
		p.failed = reason
	}
}

// Write feeds the next bytes of the answer.
func (p *usageParser) Write(b []byte) {
	if p.failed != "" {
		return
	}
	if !p.sse {
		if len(p.body)+len(b) > p.maxBody {
			p.over = true
			p.body = nil
			p.fail(fmt.Sprintf("the answer is over %d bytes", p.maxBody))
			return
		}
		p.body = append(p.body, b...)
		return
	}
	for len(b) > 0 && p.failed == "" {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if !p.lineOver {
			if len(p.line)+len(seg)+len(p.data) > p.maxEvent {
				p.lineOver = true
				// keep the field name, to know what was skipped
				if n := 16 - len(p.line); n > 0 {
					p.line = append(p.line, seg[:min(n, len(seg))]...)
				}
			} else {
				p.line = append(p.line, seg...)
			}
		}
		if i < 0 {
			return
		}
		p.fieldLine(bytes.TrimSuffix(p.line, []byte("\r")), p.lineOver)
		p.line, p.lineOver = p.line[:0], false
		b = b[i+1:]
	}
}

// fieldLine handles one line of the event stream (text/event-stream, WHATWG HTML "Server-sent
// events", 9.2.6 interpretation).
func (p *usageParser) fieldLine(line []byte, over bool) {
	if len(line) == 0 {
		p.dispatch()
		return
	}
	if line[0] == ':' {
		return
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "event":
		if over {
			p.event = "(too long)"
		} else {
			p.event = string(value)
		}
	case "data":
		if over || p.dataOver {
			p.dataOver, p.data = true, p.data[:0]
			return
		}
		if len(p.data) > 0 {
			p.data = append(p.data, '\n')
		}
		p.data = append(p.data, value...)
	}
}

// usageEvents are the events that may carry a call's usage (for an event without a name,
// as Chat Completions sends, any may).
var usageEvents = map[string]bool{"": true, "message_start": true, "message_delta": true,
	"response.completed": true, "response.incomplete": true, "response.failed": true, "(too long)": true}

func (p *usageParser) dispatch() {
	name, data, over := p.event, p.data, p.dataOver
	p.event, p.data, p.dataOver = "", p.data[:0], false
	if over {
		if usageEvents[name] {
			p.skipped = fmt.Sprintf("an event over %d bytes (%q) could hold the usage", p.maxEvent, name)
		}
		return
	}
	if len(data) == 0 {
		return
	}
	if p.api == APIChatCompletions && bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		p.ended = true
		return
	}
	p.sseEvent(name, data)
}

// u is a usage object of any of the three APIs (each reads its own fields).
type u struct {
	// Anthropic
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// OpenAI Chat Completions
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// OpenAI Responses (input_tokens, output_tokens above)
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// set copies n into *dst when present; it reports false for a count out of range.
func set(dst *int64, n *int64) bool {
	if n == nil {
		return true
	}
	if *n < 0 || *n > maxCount {
		return false
	}
	*dst = *n
	return true
}

// apply reads usage object x of the parser's API into p.tok; required names the fields that
// must be there. It reports a problem, or "".
func (p *usageParser) apply(x *u, required bool) string {
	ok := true
	switch p.api {
	case APIMessages:
		if required && (x.InputTokens == nil || x.OutputTokens == nil) {
			return "the usage lacks input_tokens or output_tokens"
		}
		ok = set(&p.tok.InputTokens, x.InputTokens) && set(&p.tok.OutputTokens, x.OutputTokens) &&
			set(&p.tok.CacheWriteTokens, x.CacheCreationInputTokens) && set(&p.tok.CacheReadTokens, x.CacheReadInputTokens)
		if x.CacheCreation != nil {
			ok = ok && set(&p.tok.CacheWrite1hTokens, x.CacheCreation.Ephemeral1h)
		}
	case APIChatCompletions:
		if x.PromptTokens == nil || x.CompletionTokens == nil {
			return "the usage lacks prompt_tokens or completion_tokens"
		}
		ok = set(&p.tok.InputTokens, x.PromptTokens) && set(&p.tok.OutputTokens, x.CompletionTokens)
		if x.PromptTokensDetails != nil {
			ok = ok && set(&p.tok.CacheReadTokens, x.PromptTokensDetails.CachedTokens)
		}
	case APIResponses:
		if x.InputTokens == nil || x.OutputTokens == nil {
			return "the usage lacks input_tokens or output_tokens"
		}
		ok = set(&p.tok.InputTokens, x.InputTokens) && set(&p.tok.OutputTokens, x.OutputTokens)
		if x.InputTokensDetails != nil {
			ok = ok && set(&p.tok.CacheReadTokens, x.InputTokensDetails.CachedTokens)
		}
	}
	if !ok {
		return fmt.Sprintf("a token count is negative or over %d", int64(maxCount))
	}
	return ""
}

// decode decodes JSON data that may be hostile into v.
func decode(data []byte, v any) string {
	if jsonx.Depth(data, maxDepth) > maxDepth {
		return fmt.Sprintf("JSON nested deeper than %d", maxDepth)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return "JSON that does not parse"
	}
	return ""
}

// sseEvent reads one event of a stream.
func (p *usageParser) sseEvent(name string, data []byte) {
	var ev struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Usage   *u     `json:"usage"`
		Message *struct {
			Model string `json:"model"`
			Usage *u     `json:"usage"`
		} `json:"message"`
		Response *struct {
			Model string `json:"model"`
			Usage *u     `json:"usage"`
		} `json:"response"`
	}
	if r := decode(data, &ev); r != "" {
		p.fail("an event holds " + r)
		return
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	switch p.api {
	case APIMessages:
		switch typ {
		case "message_start":
			if ev.Message == nil || ev.Message.Usage == nil {
				p.fail("message_start without usage")
				return
			}
			p.setModel(ev.Message.Model)
			if r := p.apply(ev.Message.Usage, true); r != "" {
				p.fail(r)
				return
			}
			p.started = true
		case "message_delta":
			// Its counts are cumulative: each replaces the one before.
			if ev.Usage == nil {
				return
			}
			if r := p.apply(ev.Usage, false); r != "" {
				p.fail(r)
				return
			}
			if ev.Usage.OutputTokens != nil && p.started {
				p.final = true
			}
		case "message_stop":
			p.ended = true
		case "error":
			if !p.final {
				p.fail("the stream ended in an error event before its usage")
			}
		}
	case APIChatCompletions:
		p.setModel(ev.Model)
		if ev.Usage != nil {
			if r := p.apply(ev.Usage, true); r != "" {
				p.fail(r)
				return
			}
			p.final = true
		}
	case APIResponses:
		if ev.Response != nil {
			p.setModel(ev.Response.Model)
		}
		switch typ {
		case "response.completed", "response.incomplete", "response.failed":
			if ev.Response == nil || ev.Response.Usage == nil {
				p.fail(typ + " without usage")
				return
			}
			if r := p.apply(ev.Response.Usage, true); r != "" {
				p.fail(r)
				return
			}
			p.final = true
		case "error":
			if !p.final {
				p.fail("the stream ended in an error event before its usage")
			}
		}
	}
}

func (p *usageParser) setModel(m string) {
	if m != "" && p.model == "" {
		p.model = clipModel(m)
	}
}

// clipModel bounds a model name as recorded (an answer could send anything there).
func clipModel(m string) string {
	if len(m) > 200 {
		m = m[:200]
	}
	return strings.ToValidUTF8(m, "?")
}

// result is what was read once the answer ended (eof: the whole body was read).
func (p *usageParser) result(eof bool) usageResult {
	r := usageResult{model: p.model, streamed: p.sse}
	eof = eof || p.ended // a client may close the stream after its last event
	if p.failed != "" {
		r.reason = p.failed
		return r
	}
	if !p.sse {
		var x struct {
			Model string `json:"model"`
			Usage *u     `json:"usage"`
		}
		if len(p.body) == 0 {
			r.reason = "an empty answer"
			return r
		}
		if reason := decode(p.body, &x); reason != "" {
			r.reason = "the answer is " + reason
			if !eof {
				r.reason = "the answer was cut before its end"
			}
			return r
		}
		p.body = nil // nothing of the answer is kept
		r.model = clipModel(x.Model)
		if x.Usage == nil {
			r.reason = "the answer has no usage"
			return r
		}
		if reason := p.apply(x.Usage, true); reason != "" {
			r.reason = reason
			return r
		}
		r.tokens = p.tok
		return r
	}
	switch {
	case p.skipped != "":
		r.reason = p.skipped
	case !p.final && p.api == APIChatCompletions && eof:
		r.reason = "the stream reported no usage (the request did not set stream_options.include_usage)"
	case !p.final && eof:
		r.reason = "the stream ended without its usage"
	case !p.final:
		r.reason = "the stream was cut before its usage"
	}
	if r.reason == "" {
		r.tokens = p.tok
	}
	return r
}

// hasToken reports whether header field name of h lists token (comma-separated, any case).
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
