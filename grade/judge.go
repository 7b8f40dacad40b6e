package grade

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/meter"
	"github.com/pab-dev/pab/internal/textcut"
)

// Judge answers one prompt with text, as deterministically as the backend
// allows (temperature 0 where the API still accepts a temperature).
//
// Implementations are safe for concurrent use.
type Judge interface {
	// Name identifies the judge and model for caching and reports, e.g.
	// "anthropic/claude-opus-5-5", "openai/gpt-5@http://127.0.0.1:11434/v1",
	// "cli/claude -p --model X". Judges that talk to different endpoints or
	// run different commands have different names.
	Name() string
	// Ask sends prompt (the whole user message) and returns the reply. The
	// reply text is trimmed of surrounding whitespace and never empty; an
	// empty answer is an error. Errors name the judge (Name()).
	Ask(ctx context.Context, prompt string) (Reply, error)
}

// Reply is one judge answer.
type Reply struct {
	Text  string // the model's text reply (all text blocks joined), trimmed of surrounding whitespace
	Model string // the model that actually answered (the fallback model when one was used); "" when unknown (CLI without a model)
	Note  string // e.g. "claude-opus-5-5 declined (refusal); answered by claude-sonnet-5-5"; "" when nothing notable happened
}

// JudgeConfig selects and configures a judge (from CLI flags and environment).
type JudgeConfig struct {
	// Kind is "api" (Anthropic Messages API), "openai" (OpenAI-compatible Chat
	// Completions) or "cli" (a command run with sh -c). "" means "api" when
	// ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN is set, else "cli".
	// "anthropic" is accepted as a synonym of "api".
	Kind string
	// Model is the model name. "" = default per kind: api "claude-opus-5-5";
	// cli: whatever the CLI uses (--model is passed only when set); openai:
	// OPENAI_MODEL from the environment, else an error.
	Model string
	// Fallback (api only) is the model re-run when the main model declines
	// (stop_reason "refusal") or stays overloaded (529) after retries.
	// "" = "claude-sonnet-5-5"; "none" (or the same name as Model) disables
	// the fallback.
	Fallback string
	// BaseURL (api/openai) is the endpoint, an absolute http or https URL.
	// "" = ANTHROPIC_BASE_URL / OPENAI_BASE_URL from the environment, or the
	// SDK default (https://api.anthropic.com/, https://api.openai.com/v1/).
	BaseURL string
	// APIKey (api/openai) is the credential. "" = environment: ANTHROPIC_API_KEY
	// (sent as x-api-key) or else ANTHROPIC_AUTH_TOKEN (sent as Authorization:
	// Bearer); OPENAI_API_KEY (sent as Authorization: Bearer; may be empty for
	// local servers such as Ollama or vLLM, then no Authorization header is sent).
	APIKey string
	// Command (cli) is the command line, run with `sh -c`, prompt on stdin,
	// answer on stdout. "" = "claude -p" (plus --model M when Model is set).
	Command string
	// Timeout bounds each call: each HTTP attempt (api/openai), each process
	// run (cli). 0 = 2 minutes; negative is an error.
	Timeout time.Duration
	// MaxRetries is how many times a retryable failure (429, 529 overloaded,
	// other 5xx, connection error) is retried before giving up or falling
	// back. 0 = 2; negative = no retries.
	MaxRetries int
	// Env looks up an environment variable; nil = os.Getenv (tests inject).
	Env func(string) string
	// Transport, when set, carries the api/openai judge's HTTP requests (pab run's usage
	// meter, which forwards them to the endpoint); nil = a clone of
	// http.DefaultTransport. It is not part of the judge's name (nor of its cache key).
	Transport http.RoundTripper
}

// Defaults of JudgeConfig.
const (
	// DefaultAnthropicModel is the api judge model when JudgeConfig.Model is "".
	DefaultAnthropicModel = "claude-opus-5-5"
	// DefaultAnthropicFallback is the api fallback model when JudgeConfig.Fallback is "".
	DefaultAnthropicFallback = "claude-sonnet-5-5"
	// DefaultJudgeCommand is the cli judge command when JudgeConfig.Command is "".
	DefaultJudgeCommand = "claude -p"
	// DefaultJudgeTimeout is the per-call timeout when JudgeConfig.Timeout is 0.
	DefaultJudgeTimeout = 2 * time.Minute
	// DefaultJudgeMaxRetries is the retry count when JudgeConfig.MaxRetries is 0.
	DefaultJudgeMaxRetries = 2
)

const (
	// judgeMaxTokens is max_tokens of every Anthropic request.
	judgeMaxTokens = 1024
	// judgeMaxHTTPBody bounds every HTTP response body read from an API (bytes).
	judgeMaxHTTPBody = 8 << 20
	// judgeErrBodyLimit bounds how much of a raw API error body is quoted in an error.
	judgeErrBodyLimit = 512
)

// NewJudge builds the judge cfg selects. It fails with a clear error for an
// unknown kind, a missing Anthropic key, an empty OpenAI model, a malformed
// base URL, or a negative timeout. It makes no network calls.
func NewJudge(cfg JudgeConfig) (Judge, error) {
	if cfg.Env == nil {
		cfg.Env = os.Getenv
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("judge: timeout %v is negative; want 0 (default %v) or a positive duration", cfg.Timeout, DefaultJudgeTimeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultJudgeTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultJudgeMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	kind := strings.ToLower(strings.TrimSpace(cfg.Kind))
	if kind == "" {
		if cfg.Env("ANTHROPIC_API_KEY") != "" || cfg.Env("ANTHROPIC_AUTH_TOKEN") != "" {
			kind = "api"
		} else {
			kind = "cli"
		}
	}
	switch kind {
	case "api", "anthropic":
		return newAnthropicJudge(cfg)
	case "openai":
		return newOpenAIJudge(cfg)
	case "cli":
		return newCLIJudge(cfg)
	default:
		return nil, fmt.Errorf("judge: unknown kind %q; want \"api\" (Anthropic), \"openai\" (OpenAI-compatible) or \"cli\" (command)", cfg.Kind)
	}
}

// judgeParseBaseURL checks that raw is an absolute http(s) URL with a host;
// what names the setting in the error.
func judgeParseBaseURL(raw, what string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("judge: %s %q is not a URL: %v", what, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("judge: %s %q: want an absolute http:// or https:// URL with a host", what, raw)
	}
	return raw, nil
}

// UsageTagHeader is the request header that carries a judge call's usage tag
// (WithUsageTag) to a usage meter in front of the judge's API (pab run's, internal/meter),
// which removes it before forwarding the call.
const UsageTagHeader = meter.TagHeader

type usageTagKey struct{}

// WithUsageTag returns ctx with a usage tag: every API call a judge (kind api or openai)
// makes under it carries the tag in UsageTagHeader, so that a meter can count the judge's
// calls of one run apart from another's. A CLI judge's calls carry none.
func WithUsageTag(ctx context.Context, tag string) context.Context {
	return context.WithValue(ctx, usageTagKey{}, tag)
}

// judgeHTTPClient returns an HTTP client (over transport, nil for the default) whose
// response bodies are cut off
// with an error after judgeMaxHTTPBody bytes, so a misbehaving server cannot
// make the SDKs buffer unbounded data.
func judgeHTTPClient(transport http.RoundTripper) *http.Client {
	var base http.RoundTripper = http.DefaultTransport
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		base = t.Clone()
	}
	if transport != nil {
		base = transport
	}
	return &http.Client{Transport: judgeLimitTransport{base: base, limit: judgeMaxHTTPBody}}
}

// judgeLimitTransport bounds response bodies of base to limit bytes.
type judgeLimitTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t judgeLimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if tag, ok := req.Context().Value(usageTagKey{}).(string); ok && tag != "" {
		req = req.Clone(req.Context())
		req.Header.Set(UsageTagHeader, tag)
	}
	res, err := t.base.RoundTrip(req)
	if err != nil || res.Body == nil {
		return res, err
	}
	res.Body = &judgeLimitedBody{rc: res.Body, left: t.limit, limit: t.limit}
	return res, nil
}

// errJudgeBodyTooLarge is returned when an API response body exceeds judgeMaxHTTPBody.
var errJudgeBodyTooLarge = fmt.Errorf("judge: API response body exceeds %d bytes", judgeMaxHTTPBody)

// judgeLimitedBody reads at most limit bytes of rc, then fails with errJudgeBodyTooLarge.
type judgeLimitedBody struct {
	rc    io.ReadCloser
	left  int64
	limit int64
}

func (b *judgeLimitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Probe for one more byte: exactly limit bytes is fine.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, errJudgeBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *judgeLimitedBody) Close() error { return b.rc.Close() }

// judgeClip shortens s to at most n bytes (on a rune boundary) for quoting in errors.
func judgeClip(s string, n int) string {
	return textcut.Cut(strings.TrimSpace(s), n, "…")
}
