package grade

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/betafallback"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicJudge asks the Anthropic Messages API (POST /v1/messages) through
// the official SDK.
//
// Request: one user message holding the prompt as a text block, max_tokens
// 1024, no temperature: the SDK sends anthropic-version 2026-10-21, under
// which the API rejects temperature/top_p/top_k with a 400 even at their
// default values, so the SDK no longer has the field.
//
// Retries of 408/409/429/5xx/529 and connection errors are the SDK's own
// (option.WithMaxRetries, honouring retry-after-ms / retry-after). A refusal
// (stop_reason "refusal") is re-run on the fallback model by the SDK's
// client-side fallback middleware (betafallback), which also redeems the
// refusal's fallback credit token; a main model still overloaded (529) after
// the SDK's retries is re-run once on the fallback model here.
type anthropicJudge struct {
	name     string
	model    string
	fallback string // "" = no fallback
	client   anthropic.Client
}

func newAnthropicJudge(cfg JudgeConfig) (*anthropicJudge, error) {
	model := strings.TrimSpace(cfg.Model)
	if model == "" {
		model = DefaultAnthropicModel
	}
	fallback := strings.TrimSpace(cfg.Fallback)
	switch {
	case fallback == "":
		fallback = DefaultAnthropicFallback
	case strings.EqualFold(fallback, "none"):
		fallback = ""
	}
	if fallback == model {
		fallback = "" // re-asking the model that just declined is pointless
	}

	opts := []option.RequestOption{
		// Credentials and endpoint come from cfg and cfg.Env only, never from
		// the SDK's own reading of the process environment or profile files.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(judgeHTTPClient(cfg.Transport)),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithRequestTimeout(cfg.Timeout),
	}

	base := cfg.BaseURL
	if base == "" {
		base = cfg.Env("ANTHROPIC_BASE_URL")
	}
	name := "anthropic/" + model
	if base != "" {
		if _, err := judgeParseBaseURL(base, "Anthropic base URL"); err != nil {
			return nil, err
		}
		opts = append(opts, option.WithBaseURL(base))
		name += "@" + base
	}

	switch {
	case cfg.APIKey != "":
		opts = append(opts, option.WithHeader("x-api-key", cfg.APIKey))
	case cfg.Env("ANTHROPIC_API_KEY") != "":
		// x-api-key rather than the SDK's WithAPIKey (which v2 sends as
		// Authorization: Bearer): the API accepts both, and gateways and
		// proxies built for the 2023-06-01 API only know x-api-key.
		opts = append(opts, option.WithHeader("x-api-key", cfg.Env("ANTHROPIC_API_KEY")))
	case cfg.Env("ANTHROPIC_AUTH_TOKEN") != "":
		opts = append(opts, option.WithAuthToken(cfg.Env("ANTHROPIC_AUTH_TOKEN")))
	default:
		return nil, fmt.Errorf("judge %s: no Anthropic credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or choose another judge kind (openai, cli)", name)
	}

	return &anthropicJudge{
		name:     name,
		model:    model,
		fallback: fallback,
		client:   anthropic.NewClient(opts...),
	}, nil
}

// Name is "anthropic/<model>", plus "@<base URL>" when the endpoint is not the SDK default.
func (j *anthropicJudge) Name() string { return j.name }

// Ask sends prompt to the main model, falling back as described on anthropicJudge.
func (j *anthropicJudge) Ask(ctx context.Context, prompt string) (Reply, error) {
	var opts []option.RequestOption
	if j.fallback != "" {
		opts = append(opts, option.WithMiddleware(betafallback.BetaRefusalFallbackMiddleware(
			[]anthropic.BetaFallbackParam{{Model: j.fallback}},
		)))
	}
	msg, err := j.send(ctx, j.model, prompt, opts...)
	if err != nil {
		if j.fallback == "" || !anthropicOverloaded(err) || ctx.Err() != nil {
			return Reply{}, j.wrap(j.model, err)
		}
		fmsg, ferr := j.send(ctx, j.fallback, prompt)
		if ferr != nil {
			return Reply{}, fmt.Errorf("judge %s: %s stayed overloaded (%v); fallback %s failed too: %w",
				j.name, j.model, anthropicErrSummary(err), j.fallback, j.describe(j.fallback, ferr))
		}
		note := fmt.Sprintf("%s overloaded after retries (%s); answered by %s", j.model, anthropicErrSummary(err), j.fallback)
		return j.reply(fmsg, j.fallback, note)
	}
	return j.reply(msg, j.model, "")
}

// send makes one SDK call (with the SDK's retries) for model.
func (j *anthropicJudge) send(ctx context.Context, model, prompt string, opts ...option.RequestOption) (*anthropic.BetaMessage, error) {
	params := anthropic.BetaMessageNewParams{
		Model:     model,
		MaxTokens: judgeMaxTokens,
		Messages:  []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(prompt))},
	}
	return j.client.Beta.Messages.New(ctx, params, opts...)
}

// reply turns a served message into a Reply. asked is the model the request
// named; note is what happened before (an overload fallback).
func (j *anthropicJudge) reply(msg *anthropic.BetaMessage, asked, note string) (Reply, error) {
	if msg == nil {
		return Reply{}, fmt.Errorf("judge %s: %s returned no message", j.name, asked)
	}
	var text strings.Builder
	var notes []string
	if note != "" {
		notes = append(notes, note)
	}
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "fallback":
			// Prepended by the fallback middleware (or the server) per model
			// boundary that a refusal crossed.
			fb := block.AsFallback()
			why := "refusal"
			if c := string(fb.Trigger.Category); c != "" {
				why += ", category " + c
			}
			notes = append(notes, fmt.Sprintf("%s declined (%s); answered by %s", fb.From.Model, why, fb.To.Model))
		}
	}
	model := msg.Model
	if model == "" {
		model = asked
	}
	switch msg.StopReason {
	case anthropic.BetaStopReasonRefusal:
		why := "refusal"
		if c := string(msg.StopDetails.Category); c != "" {
			why += ", category " + c
		}
		if e := strings.TrimSpace(msg.StopDetails.Explanation); e != "" {
			why += ": " + judgeClip(e, 200)
		}
		if j.fallback != "" && asked != j.fallback {
			return Reply{}, fmt.Errorf("judge %s: %s declined (%s) and fallback %s declined too", j.name, j.model, why, j.fallback)
		}
		return Reply{}, fmt.Errorf("judge %s: %s declined to answer (%s)", j.name, model, why)
	case anthropic.BetaStopReasonMaxTokens:
		notes = append(notes, fmt.Sprintf("reply cut off at max_tokens %d", judgeMaxTokens))
	}
	out := strings.TrimSpace(text.String())
	if out == "" {
		return Reply{}, fmt.Errorf("judge %s: %s returned no text (stop_reason %q, %d content blocks)", j.name, model, msg.StopReason, len(msg.Content))
	}
	return Reply{Text: out, Model: model, Note: strings.Join(notes, "; ")}, nil
}

// wrap names the judge and the model in err.
func (j *anthropicJudge) wrap(model string, err error) error {
	return fmt.Errorf("judge %s: %w", j.name, j.describe(model, err))
}

// describe turns an SDK error into "model: 401 authentication_error: invalid
// x-api-key" form, keeping err in the chain.
func (j *anthropicJudge) describe(model string, err error) error {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return &judgeAPIError{summary: model + ": " + anthropicErrSummary(err), err: err}
	}
	return fmt.Errorf("%s: %w", model, err)
}

// anthropicErrSummary is "<status> <error type>: <message>" for an API error,
// else err's text.
func anthropicErrSummary(err error) string {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return err.Error()
	}
	s := fmt.Sprintf("HTTP %d", apiErr.StatusCode)
	if t := string(apiErr.Type()); t != "" {
		s += " " + t
	}
	switch {
	case apiErr.Message != "":
		s += ": " + judgeClip(apiErr.Message, judgeErrBodyLimit)
	case apiErr.RawJSON() != "":
		s += ": " + judgeClip(apiErr.RawJSON(), judgeErrBodyLimit)
	}
	return s
}

// anthropicOverloaded reports whether err is the API's overloaded_error (HTTP 529).
func anthropicOverloaded(err error) bool {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.StatusCode == 529 || apiErr.Type() == "overloaded_error"
}

// judgeAPIError carries a short human summary of an SDK API error while
// keeping the SDK error (with its status code) reachable via errors.As.
type judgeAPIError struct {
	summary string
	err     error
}

func (e *judgeAPIError) Error() string { return e.summary }
func (e *judgeAPIError) Unwrap() error { return e.err }
