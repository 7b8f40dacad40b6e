package grade

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewJudgeSelectsKind(t *testing.T) {
	bin := t.TempDir() // a stand-in claude on PATH for the default CLI judge
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		cfg      JudgeConfig
		env      map[string]string
		wantName string
	}{
		{"default api with key", JudgeConfig{}, map[string]string{"ANTHROPIC_API_KEY": "k"}, "anthropic/claude-opus-5-5"},
		{"default api with token", JudgeConfig{}, map[string]string{"ANTHROPIC_AUTH_TOKEN": "t"}, "anthropic/claude-opus-5-5"},
		{"default cli without key", JudgeConfig{}, nil, "cli/claude -p"},
		{"cli model", JudgeConfig{Kind: "cli", Model: "claude-haiku-5-5"}, nil, "cli/claude -p --model claude-haiku-5-5"},
		{"cli model quoted", JudgeConfig{Kind: "cli", Model: "it's x"}, nil, `cli/claude -p --model 'it'\''s x'`},
		{"cli command", JudgeConfig{Kind: "cli", Command: "  ./judge.sh --fast "}, nil, "cli/./judge.sh --fast"},
		{"api model and base url from env", JudgeConfig{Kind: "API", Model: "claude-haiku-5-5"},
			map[string]string{"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}, "anthropic/claude-haiku-5-5@http://127.0.0.1:9/"},
		{"api base url from cfg wins", JudgeConfig{Kind: "anthropic", BaseURL: "https://gw.example/x"},
			map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "ANTHROPIC_API_KEY": "k"}, "anthropic/claude-opus-5-5@https://gw.example/x"},
		{"api key from cfg", JudgeConfig{Kind: "api", APIKey: "k"}, nil, "anthropic/claude-opus-5-5"},
		{"openai hosted", JudgeConfig{Kind: "openai", Model: "gpt-5"}, map[string]string{"OPENAI_API_KEY": "k"}, "openai/gpt-5"},
		{"openai model from env", JudgeConfig{Kind: "openai"},
			map[string]string{"OPENAI_MODEL": "llama3", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "openai/llama3@http://127.0.0.1:11434/v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"PATH": bin}
			for k, v := range tc.env {
				env[k] = v
			}
			tc.cfg.Env = judgeEnv(env)
			j, err := NewJudge(tc.cfg)
			if err != nil {
				t.Fatalf("NewJudge: %v", err)
			}
			if j.Name() != tc.wantName {
				t.Errorf("Name() = %q, want %q", j.Name(), tc.wantName)
			}
		})
	}
}

func TestNewJudgeErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  JudgeConfig
		env  map[string]string
		want []string
	}{
		{"unknown kind", JudgeConfig{Kind: "gemini"}, nil, []string{`unknown kind "gemini"`, "api", "openai", "cli"}},
		{"default cli judge without claude on PATH", JudgeConfig{}, map[string]string{"PATH": "/nonexistent"},
			[]string{`"claude -p"`, "not on PATH", "ANTHROPIC_API_KEY", "--judge-cmd"}},
		{"api without key", JudgeConfig{Kind: "api"}, nil, []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "anthropic/claude-opus-5-5"}},
		{"openai without model", JudgeConfig{Kind: "openai"}, map[string]string{"OPENAI_API_KEY": "k"}, []string{"no model", "OPENAI_MODEL"}},
		{"openai hosted without key", JudgeConfig{Kind: "openai", Model: "gpt-5"}, nil, []string{"OPENAI_API_KEY", "openai/gpt-5"}},
		{"bad anthropic base url", JudgeConfig{Kind: "api", BaseURL: "localhost:8080"}, map[string]string{"ANTHROPIC_API_KEY": "k"}, []string{"Anthropic base URL", "localhost:8080", "http://"}},
		{"bad openai base url", JudgeConfig{Kind: "openai", Model: "m", BaseURL: "ftp://x/v1"}, nil, []string{"OpenAI base URL", "ftp://x/v1"}},
		{"unparsable base url", JudgeConfig{Kind: "openai", Model: "m", BaseURL: "http://[::1"}, nil, []string{"not a URL"}},
		{"negative timeout", JudgeConfig{Kind: "cli", Timeout: -time.Second}, nil, []string{"timeout", "negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Env = judgeEnv(tc.env)
			j, err := NewJudge(tc.cfg)
			if err == nil {
				t.Fatalf("NewJudge succeeded: %s", j.Name())
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestJudgeClip(t *testing.T) {
	if got := judgeClip("  short  ", 10); got != "short" {
		t.Errorf("judgeClip = %q", got)
	}
	got := judgeClip(strings.Repeat("ü", 10), 5) // 2-byte runes: cut on a boundary
	if got != "üü…" {
		t.Errorf("judgeClip = %q, want %q", got, "üü…")
	}
}

func TestJudgeLimitedBody(t *testing.T) {
	for _, tc := range []struct {
		n       int
		wantErr bool
	}{{0, false}, {5, false}, {6, true}, {100, true}} {
		b := &judgeLimitedBody{rc: judgeNopCloser{strings.NewReader(strings.Repeat("x", tc.n))}, left: 5, limit: 5}
		data, err := judgeReadAll(b)
		if tc.wantErr != (err != nil) {
			t.Errorf("%d bytes with limit 5: err = %v, data %d bytes", tc.n, err, len(data))
		}
		if !tc.wantErr && len(data) != tc.n {
			t.Errorf("%d bytes with limit 5: read %d", tc.n, len(data))
		}
	}
}

type judgeNopCloser struct{ *strings.Reader }

func (judgeNopCloser) Close() error { return nil }

func judgeReadAll(b *judgeLimitedBody) ([]byte, error) {
	var out []byte
	buf := make([]byte, 2)
	for {
		n, err := b.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
	}
}
