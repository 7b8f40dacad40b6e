// Package meter is pab's model usage meter: a pass-through HTTP server on a loopback port in
// front of an agent's model API, which forwards every request and answer unchanged and
// records, for every model call, the tokens the API reported, its latency and status, and
// turns them into a cost with a price table (prices.yaml, PriceTable).
//
// The agent is handed the meter's base URL for each API kind (BaseURL: for example
// http://127.0.0.1:PORT/anthropic in ANTHROPIC_BASE_URL, http://127.0.0.1:PORT/openai in
// OPENAI_BASE_URL or Codex's provider base_url) in place of the endpoint pab itself was given
// (UpstreamsFromEnv: ANTHROPIC_BASE_URL and OPENAI_BASE_URL, else https://api.anthropic.com
// and https://api.openai.com/v1). A request for /KIND/REST goes to the upstream base URL of
// KIND with REST appended (its query kept), so whatever a client appends to its base URL
// (Claude Code: /v1/messages; the OpenAI SDKs and Codex, whose base URL ends in /v1:
// /responses, /chat/completions) reaches the same path upstream. Method, headers (the key
// headers included), body and query are forwarded as they are; the answer's status, headers
// and body come back as they are, a server-sent event stream flushed as each piece arrives
// (never held back for metering). A request's body is read whole (at most MaxRequest bytes)
// before the request is forwarded (internal/wholebody: the transport never reads a body the
// meter's server has closed, which cut answers; golang/go#40747).
//
// Model calls are POST requests whose path ends in /messages (the Anthropic Messages API),
// /chat/completions (OpenAI Chat Completions) or /responses (OpenAI Responses API). Their
// usage is read from the answer only, never from the request, by the parsers of usage.go:
// the JSON answer's usage object, or the usage events of a stream. The meter keeps nothing
// but numbers, model names, statuses and times: no prompt, no output, no header, no key.
//
// It fails closed: a call whose usage cannot be read (a body or event over the bounds, JSON
// that does not parse, a stream cut before its usage, a streamed Chat Completions call
// without stream_options.include_usage, no answer from the upstream) is marked unreadable,
// counted in Totals.UnreadableCalls, and makes the total cost unknown (null), never 0.
// WebSocket upgrades (the Responses API over WebSocket) are refused with 501, so that no
// model traffic passes unmetered; a request whose body is over MaxRequest bytes is refused
// with 413, one whose body cannot be read with 400. A refused request is never forwarded
// (nothing is billed for it) and is recorded as refused (Call.Refused), outside the model
// calls; see docs/run.md, "Model usage and cost".
package meter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/wholebody"
)

// Kind is the API kind of a route of the meter: the first path segment of its base URL.
type Kind string

// The API kinds.
const (
	KindAnthropic Kind = "anthropic"
	KindOpenAI    Kind = "openai"
)

// API is the format of a model call, told by its path.
type API string

// The model call formats the meter reads.
const (
	APIMessages        API = "anthropic-messages"      // POST .../messages
	APIChatCompletions API = "openai-chat-completions" // POST .../chat/completions
	APIResponses       API = "openai-responses"        // POST .../responses
)

// The official endpoints, used when the environment names none (UpstreamsFromEnv).
const (
	DefaultAnthropicURL = "https://api.anthropic.com"
	DefaultOpenAIURL    = "https://api.openai.com/v1"
)

// Default bounds (Options).
const (
	DefaultMaxBody  = 32 << 20
	DefaultMaxEvent = 16 << 20
	// DefaultMaxRequest is 32 MiB: Anthropic's Messages API takes requests of at most
	// 32 MB (a larger one gets 413 request_too_large), so no request it would take is
	// refused. We know of no documented bound for OpenAI's Chat Completions and Responses;
	// a larger request for them needs Options.MaxRequest.
	DefaultMaxRequest = 32 << 20
)

// Options configure a meter.
type Options struct {
	// Upstreams maps each API kind served to the base URL calls are forwarded to (http or
	// https, no query). UpstreamsFromEnv gives the usual map.
	Upstreams map[Kind]string
	// Prices turns tokens into cost; nil leaves every cost unknown.
	Prices *PriceTable
	// MaxBody bounds a non-streamed answer body read for its usage (bytes; default
	// DefaultMaxBody). A longer body is forwarded whole, its usage marked unreadable.
	MaxBody int
	// MaxEvent bounds one server-sent event (its lines and data, bytes; default
	// DefaultMaxEvent). A longer event is forwarded whole and skipped by the parser; when it
	// could have held the usage, the call is marked unreadable.
	MaxEvent int
	// MaxRequest bounds a request body (bytes; default DefaultMaxRequest). Every request's
	// body is read whole into memory before it is forwarded; a longer one is refused with
	// 413, not forwarded, and recorded as refused.
	MaxRequest int
	// Transport forwards the requests (default: a clone of http.DefaultTransport, which uses
	// the environment's HTTPS_PROXY for non-loopback upstreams).
	Transport http.RoundTripper
	// Log receives one line per problem (an upstream that does not answer, an unreadable
	// usage): API kind, path, status and reason, never a header, body or key. Default: none.
	Log io.Writer
}

// UpstreamsFromEnv returns the upstream of each kind from getenv (os.Getenv): the
// ANTHROPIC_BASE_URL and OPENAI_BASE_URL the agent would have used, else the official
// endpoints DefaultAnthropicURL and DefaultOpenAIURL.
func UpstreamsFromEnv(getenv func(string) string) map[Kind]string {
	up := map[Kind]string{KindAnthropic: DefaultAnthropicURL, KindOpenAI: DefaultOpenAIURL}
	if v := strings.TrimSpace(getenv("ANTHROPIC_BASE_URL")); v != "" {
		up[KindAnthropic] = v
	}
	if v := strings.TrimSpace(getenv("OPENAI_BASE_URL")); v != "" {
		up[KindOpenAI] = v
	}
	return up
}

// Meter is a running meter. Its methods may be called from any goroutine.
type Meter struct {
	opts     Options
	ln       net.Listener
	srv      *http.Server
	proxies  map[Kind]*httputil.ReverseProxy
	log      *log.Logger
	inflight sync.WaitGroup

	mu    sync.Mutex
	calls []Call
}

// Start checks opts and starts a meter on a free port of 127.0.0.1. Errors: an upstream that
// is not an absolute http(s) URL without query, fragment or a kind name with a slash.
func Start(opts Options) (*Meter, error) {
	if len(opts.Upstreams) == 0 {
		return nil, errors.New("meter: no upstream")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxEvent <= 0 {
		opts.MaxEvent = DefaultMaxEvent
	}
	if opts.MaxRequest <= 0 {
		opts.MaxRequest = DefaultMaxRequest
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	m := &Meter{opts: opts, proxies: map[Kind]*httputil.ReverseProxy{}, log: log.New(logw, "meter: ", 0)}
	for kind, raw := range opts.Upstreams {
		if kind == "" || strings.ContainsAny(string(kind), "/?#% ") {
			return nil, fmt.Errorf("meter: API kind %q: want a plain name", kind)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			shown := raw
			if err == nil {
				shown = u.Redacted()
			}
			return nil, fmt.Errorf("meter: upstream of %s: %q is not an http(s) base URL without query", kind, shown)
		}
		m.proxies[kind] = m.proxy(kind, u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	m.ln = ln
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 30 * time.Second, ErrorLog: m.log}
	go m.srv.Serve(ln)
	return m, nil
}

// BaseURL is the base URL to hand the agent for kind, http://127.0.0.1:PORT/KIND ("" for a
// kind without upstream).
func (m *Meter) BaseURL(kind Kind) string {
	if _, ok := m.proxies[kind]; !ok {
		return ""
	}
	return "http://" + m.ln.Addr().String() + "/" + string(kind)
}

// Close stops the meter: no new connection, the calls in flight given up to ctx's end to
// finish (then their connections are closed), and every call recorded before it returns,
// so Usage after Close is final.
func (m *Meter) Close(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if err != nil {
		m.srv.Close()
	}
	m.inflight.Wait()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil // the calls cut short are recorded as unreadable
	}
	return err
}

// TagHeader is the request header that tags a call (grade.WithUsageTag sets it on a
// judge's calls); the meter records its value (at most maxTag bytes) as Call.Tag and
// never forwards it.
const TagHeader = "X-Pab-Usage-Tag"

// maxTag bounds a recorded tag (bytes).
const maxTag = 256

// UsageOf returns the calls recorded so far whose tag is tag, and their totals.
func (m *Meter) UsageOf(tag string) Usage {
	m.mu.Lock()
	var calls []Call
	for _, c := range m.calls {
		if c.Tag == tag {
			calls = append(calls, c)
		}
	}
	m.mu.Unlock()
	return Usage{Totals: Sum(calls), Calls: calls}
}

// Usage returns the calls recorded so far, in the order they ended, and their totals.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	calls := append([]Call(nil), m.calls...)
	m.mu.Unlock()
	return Usage{Totals: Sum(calls), Calls: calls}
}

func (m *Meter) record(c Call) {
	if c.Unreadable {
		m.log.Printf("%s %s: status %d: usage unreadable: %s", c.Kind, c.Path, c.Status, c.Reason)
	}
	if !c.Unreadable && !c.Refused && m.opts.Prices != nil && c.Status/100 == 2 {
		if p, name, ok := m.opts.Prices.Lookup(c.Model); ok {
			cost := p.Cost(&c)
			c.CostUSD, c.PricedAs = &cost, name
		}
	} else if !c.Unreadable && !c.Refused && c.Status/100 != 2 {
		zero := 0.0 // an error answer is not billed
		c.CostUSD = &zero
	}
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
}

// apiOf tells a model call by its method and path.
func apiOf(method, path string) API {
	if method != http.MethodPost {
		return ""
	}
	switch {
	case strings.HasSuffix(path, "/messages"):
		return APIMessages
	case strings.HasSuffix(path, "/chat/completions"):
		return APIChatCompletions
	case strings.HasSuffix(path, "/responses"):
		return APIResponses
	}
	return ""
}

type ctxKey struct{}

// callState is one request's metering, carried in its context through the reverse proxy.
type callState struct {
	m     *Meter
	call  Call
	start time.Time
	once  sync.Once
}

func (s *callState) finish(status int, u usageResult) {
	s.once.Do(func() {
		c := s.call
		c.Status = status
		c.LatencyMS = time.Since(s.start).Milliseconds()
		c.Model = u.model
		c.Streamed = u.streamed
		c.tokens = u.tokens
		if u.reason != "" && (status/100 == 2 || u.noAnswer) {
			c.Unreadable, c.Reason = true, u.reason
		} else if u.reason != "" {
			c.tokens = tokens{} // an error answer without usage: nothing billed
		}
		s.m.record(c)
	})
}

// ServeHTTP routes /KIND/REST to KIND's upstream.
func (m *Meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.inflight.Add(1)
	defer m.inflight.Done()
	rest := strings.TrimPrefix(r.URL.Path, "/")
	kindName, _, _ := strings.Cut(rest, "/")
	kind := Kind(kindName)
	p, ok := m.proxies[kind]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pab meter: no API kind %q here (known: %s)", kindName, m.kinds()))
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/"+kindName)
	api := apiOf(r.Method, path)
	tag := r.Header.Get(TagHeader)
	r.Header.Del(TagHeader) // pab's own: never forwarded
	if len(tag) > maxTag {
		tag = tag[:maxTag]
	}
	if hasToken(r.Header, "Connection", "upgrade") || r.Header.Get("Upgrade") != "" {
		// A WebSocket (Codex's Responses API over WebSocket) would carry model calls the
		// meter cannot read: refused, so that the client uses HTTP or fails loudly.
		m.record(Call{Kind: kind, API: api, Path: path, Status: http.StatusNotImplemented, Refused: true, Time: time.Now().UTC()})
		m.log.Printf("%s %s: refused a protocol upgrade (%s): the meter reads HTTP only", kind, path, r.Header.Get("Upgrade"))
		writeError(w, http.StatusNotImplemented, "pab meter: protocol upgrades (WebSocket) are not metered; use HTTP (server-sent events)")
		return
	}
	// The body is read whole before the request goes on: the transport then never reads
	// it from this server, which closes it once the answer starts (package wholebody).
	whole, err := wholebody.Read(r, int64(m.opts.MaxRequest))
	if err != nil {
		status, msg := http.StatusBadRequest, "pab meter: the request's body could not be read; not forwarded"
		var tooLarge *readlimit.TooLargeError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
			msg = fmt.Sprintf("pab meter: a request body of more than %d bytes is not forwarded (the meter's bound)", m.opts.MaxRequest)
			err = fmt.Errorf("a body of more than %d bytes", m.opts.MaxRequest)
		}
		m.record(Call{Kind: kind, API: api, Path: path, Tag: tag, Status: status, Refused: true, Time: time.Now().UTC()})
		m.log.Printf("%s %s: refused a request (%d), not forwarded: %v", kind, path, status, err)
		writeError(w, status, msg)
		return
	}
	r = whole
	if api == "" {
		p.ServeHTTP(w, r)
		return
	}
	s := &callState{m: m, start: time.Now(), call: Call{Kind: kind, API: api, Path: path, Tag: tag, Time: time.Now().UTC()}}
	p.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)))
	// A handler that returned without the body being closed (it always is) still records.
	s.finish(0, usageResult{reason: "the answer was never read", noAnswer: true})
}

func (m *Meter) kinds() string {
	var ks []string
	for k := range m.proxies {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// proxy builds the reverse proxy of one kind.
func (m *Meter) proxy(kind Kind, target *url.URL) *httputil.ReverseProxy {
	prefix := "/" + string(kind)
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, prefix)
			pr.Out.URL.RawPath = strings.TrimPrefix(pr.In.URL.RawPath, prefix)
			pr.SetURL(target)
			// The Go transport then asks for gzip and decodes it, so the answer is read in
			// plain text; the client gets it uncompressed (on loopback).
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:     m.opts.Transport,
		FlushInterval: -1,
		ErrorLog:      m.log,
		ModifyResponse: func(resp *http.Response) error {
			s, _ := resp.Request.Context().Value(ctxKey{}).(*callState)
			if s == nil {
				return nil
			}
			enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
			p := newUsageParser(s.call.API, httpx.MediaType(resp.Header.Get("Content-Type")) == "text/event-stream",
				m.opts.MaxBody, m.opts.MaxEvent)
			if enc != "" && enc != "identity" {
				p.fail("the answer is compressed (" + enc + ")")
			}
			resp.Body = &tap{body: resp.Body, p: p, s: s, status: resp.StatusCode}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if s, _ := r.Context().Value(ctxKey{}).(*callState); s != nil {
				s.finish(http.StatusBadGateway, usageResult{reason: "no answer from the upstream", noAnswer: true})
			}
			if !errors.Is(err, context.Canceled) {
				m.log.Printf("%s: no answer from the upstream: %v", kind, err)
			}
			writeError(w, http.StatusBadGateway, "pab meter: no answer from the upstream")
		},
	}
}

// tap passes an answer body through, feeding its bytes to the usage parser, and records the
// call at its end (end of body, or closed early).
type tap struct {
	body   io.ReadCloser
	p      *usageParser
	s      *callState
	status int
}

func (t *tap) Read(b []byte) (int, error) {
	n, err := t.body.Read(b)
	if n > 0 {
		t.p.Write(b[:n])
	}
	if err == io.EOF {
		t.s.finish(t.status, t.p.result(true))
	} else if err != nil {
		t.s.finish(t.status, t.p.result(false))
	}
	return n, err
}

func (t *tap) Close() error {
	t.s.finish(t.status, t.p.result(false))
	return t.body.Close()
}

// writeError answers with a JSON error body both SDKs understand well enough to show.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%q}}`+"\n", msg)
}
