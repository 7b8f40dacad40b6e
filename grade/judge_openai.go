package grade

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
)

// openaiDefaultBaseURL is the SDK's default endpoint (hosted OpenAI).
const openaiDefaultBaseURL = "https://api.openai.com/v1/"

// openaiJudge asks an OpenAI-compatible Chat Completions endpoint
// (POST <base>/chat/completions) through the official SDK: one user message
// holding the prompt, temperature 0. It works with hosted OpenAI and with
// local servers (vLLM, Ollama, llama.cpp) that need no key.
//
// Retries are the SDK's own (option.WithMaxRetries). A model that rejects
// temperature 0 with a 400 naming "temperature" (OpenAI's reasoning models
// accept only the default) is asked once more without a temperature, and
// Reply.Note says so.
type openaiJudge struct {
	name   string
	model  string
	client openai.Client
}

func newOpenAIJudge(cfg JudgeConfig) (*openaiJudge, error) {
	model := strings.TrimSpace(cfg.Model)
	if model == "" {
		model = strings.TrimSpace(cfg.Env("OPENAI_MODEL"))
	}
	if model == "" {
		return nil, errors.New("judge openai: no model: set the judge model (or OPENAI_MODEL), e.g. gpt-5 or the name a local server such as Ollama or vLLM serves")
	}
	base := cfg.BaseURL
	if base == "" {
		base = cfg.Env("OPENAI_BASE_URL")
	}
	name := "openai/" + model
	hosted := base == ""
	if !hosted {
		if _, err := judgeParseBaseURL(base, "OpenAI base URL"); err != nil {
			return nil, err
		}
		name += "@" + base
	} else {
		base = openaiDefaultBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = cfg.Env("OPENAI_API_KEY")
	}
	if key == "" && hosted {
		return nil, fmt.Errorf("judge %s: no API key for %s: set OPENAI_API_KEY, or set OPENAI_BASE_URL to a local server that needs none", name, openaiDefaultBaseURL)
	}
	client := openai.NewClient(
		// Set explicitly, even when empty, so the SDK's own reading of
		// OPENAI_BASE_URL / OPENAI_API_KEY from the process environment
		// cannot override cfg.Env. An empty key sends no Authorization header.
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithHTTPClient(judgeHTTPClient(cfg.Transport)),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithRequestTimeout(cfg.Timeout),
	)
	return &openaiJudge{name: name, model: model, client: client}, nil
}

// Name is "openai/<model>", plus "@<base URL>" when the endpoint is not hosted OpenAI.
func (j *openaiJudge) Name() string { return j.name }

// Ask sends prompt as one user message at temperature 0.
func (j *openaiJudge) Ask(ctx context.Context, prompt string) (Reply, error) {
	params := openai.ChatCompletionNewParams{
		Model:       j.model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		Temperature: openai.Float(0),
	}
	note := ""
	res, err := j.client.Chat.Completions.New(ctx, params)
	if err != nil && openaiRejectsTemperature(err) && ctx.Err() == nil {
		params.Temperature = param.Opt[float64]{}
		note = fmt.Sprintf("%s rejected temperature 0; asked without a temperature", j.model)
		res, err = j.client.Chat.Completions.New(ctx, params)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("judge %s: %w", j.name, openaiDescribe(err))
	}
	if res == nil || len(res.Choices) == 0 {
		return Reply{}, fmt.Errorf("judge %s: reply has no choices", j.name)
	}
	choice := res.Choices[0]
	text := strings.TrimSpace(choice.Message.Content)
	if text == "" {
		if r := strings.TrimSpace(choice.Message.Refusal); r != "" {
			return Reply{}, fmt.Errorf("judge %s: model declined to answer: %s", j.name, judgeClip(r, judgeErrBodyLimit))
		}
		return Reply{}, fmt.Errorf("judge %s: reply has empty content (finish_reason %q)", j.name, choice.FinishReason)
	}
	if choice.FinishReason == "length" {
		note = strings.TrimPrefix(note+"; reply cut off at the token limit (finish_reason \"length\")", "; ")
	}
	model := res.Model
	if model == "" {
		model = j.model
	}
	return Reply{Text: text, Model: model, Note: note}, nil
}

// openaiRejectsTemperature reports whether err is a 400 about the temperature parameter.
func openaiRejectsTemperature(err error) bool {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		return false
	}
	return apiErr.Param == "temperature" ||
		strings.Contains(strings.ToLower(apiErr.Message), "temperature") ||
		strings.Contains(strings.ToLower(apiErr.RawJSON()), "temperature")
}

// openaiDescribe gives an SDK API error its status, type and message
// ("HTTP 401 invalid_request_error: Incorrect API key provided"), keeping
// the SDK error reachable with errors.As.
func openaiDescribe(err error) error {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return err
	}
	s := fmt.Sprintf("HTTP %d", apiErr.StatusCode)
	if apiErr.Type != "" {
		s += " " + apiErr.Type
	}
	if apiErr.Code != "" && apiErr.Code != apiErr.Type {
		s += " (" + apiErr.Code + ")"
	}
	switch {
	case apiErr.Message != "":
		s += ": " + judgeClip(apiErr.Message, judgeErrBodyLimit)
	case apiErr.RawJSON() != "":
		s += ": " + judgeClip(apiErr.RawJSON(), judgeErrBodyLimit)
	}
	return &judgeAPIError{summary: s, err: err}
}
