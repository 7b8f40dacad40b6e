package batch

import (
	"context"
	"strings"
	"testing"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/fakemodel"
	"github.com/pab-dev/pab/internal/meter"
)

// TestJudgeUsageByRun: an OpenAI-compatible judge whose transport is JudgeTransport sends
// its calls through the batch's judge meter, each tagged with the run it graded
// (grade.WithUsageTag): the meter counts them per run exactly as the model reported them,
// the tag never reaches the model, and the judge's name (its cache key) does not change.
func TestJudgeUsageByRun(t *testing.T) {
	srv, err := fakemodel.Start(fakemodel.Plan{Marker: "never in a judge prompt", Steps: []fakemodel.Step{{Tool: "x"}}, Answer: "a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	upstream := srv.URL() + "/v1"
	jm, err := meter.Start(meter.Options{Upstreams: map[meter.Kind]string{meter.KindOpenAI: upstream}, Prices: meter.DefaultPrices()})
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close(context.Background())
	tr, err := JudgeTransport(jm, meter.KindOpenAI, upstream)
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"OPENAI_API_KEY": "sk-judge-secret", "OPENAI_MODEL": "gpt-5.5"}[k]
	}
	plain, err := grade.NewJudge(grade.JudgeConfig{Kind: "openai", BaseURL: upstream, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	j, err := grade.NewJudge(grade.JudgeConfig{Kind: "openai", BaseURL: upstream, Env: env, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	if j.Name() != plain.Name() {
		t.Errorf("the metered judge is named %q, the plain one %q: its cache would not be shared", j.Name(), plain.Name())
	}
	ctx := context.Background()
	for _, tag := range []string{"task-a/1", "task-a/1", "task-b/2"} {
		if _, err := j.Ask(grade.WithUsageTag(ctx, tag), "Is the answer right? run "+tag); err != nil {
			t.Fatal(err)
		}
	}
	var want [2]fakemodel.Usage
	for i, q := range srv.Requests() {
		if q.Usage == nil {
			t.Fatalf("request %d reported no usage", i)
		}
		k := 0
		if i == 2 {
			k = 1
		}
		want[k].Input += q.Usage.Input
		want[k].Output += q.Usage.Output
		if strings.Contains(string(q.Body), "X-Pab") {
			t.Errorf("the usage tag reached the model")
		}
	}
	for i, tag := range []string{"task-a/1", "task-b/2"} {
		u := jm.UsageOf(tag)
		if u.Totals.Calls != 2-i || u.Totals.InputTokens != want[i].Input || u.Totals.OutputTokens != want[i].Output || u.Totals.UnreadableCalls != 0 {
			t.Errorf("%s: %d calls, in %d out %d; want %d calls, %+v", tag, u.Totals.Calls, u.Totals.InputTokens, u.Totals.OutputTokens, 2-i, want[i])
		}
	}
	if u := jm.UsageOf(""); u.Totals.Calls != 0 {
		t.Errorf("%d untagged calls", u.Totals.Calls)
	}
	// a call outside the judge's endpoint is refused, never sent unmetered
	other, err := grade.NewJudge(grade.JudgeConfig{Kind: "openai", BaseURL: "http://127.0.0.1:1/v1", Env: env, Transport: tr, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Ask(ctx, "x"); err == nil || !strings.Contains(err.Error(), "outside its endpoint") {
		t.Errorf("a call elsewhere: %v", err)
	}
}
