package batch

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/meter"
)

// Model usage (docs/run.md, "Model usage and cost"): every run's agent gets a usage meter
// (internal/meter) of its own in front of its model API, through the base-URL variables the
// CLIs read, and the batch's judge one shared meter whose calls carry the run they graded
// (grade.WithUsageTag). run.json gets the totals (Info.Usage), usage.json every call, and
// summary.json the batch's totals.

// FileUsage is the run's model calls, one by one (agent and judge), in the run directory.
const FileUsage = "usage.json"

// meterClose bounds the wait for the agent's calls still in flight once it has exited.
const meterClose = 10 * time.Second

// MeterConfig turns metering on for a batch (Config.Meter).
type MeterConfig struct {
	// Upstreams are where the agent's calls are forwarded, by API kind
	// (AgentUpstreams gives the usual map).
	Upstreams map[meter.Kind]string
	// Prices turns tokens into cost (nil: every cost unknown).
	Prices *meter.PriceTable
	// Judge is the batch's judge meter, nil when the judge's calls are not metered;
	// JudgeNote then says why (a CLI judge, whose model calls pab cannot see).
	Judge     *meter.Meter
	JudgeNote string
}

// AgentUpstreams are the endpoints an agent would have called, from getenv: Anthropic's
// ANTHROPIC_BASE_URL, else https://api.anthropic.com; OpenAI's CODEX_BASE_URL (the Codex
// scripts' endpoint, agents/codex-env.sh), else OPENAI_BASE_URL, else
// https://api.openai.com/v1.
func AgentUpstreams(getenv func(string) string) map[meter.Kind]string {
	up := meter.UpstreamsFromEnv(getenv)
	if v := strings.TrimSpace(getenv("CODEX_BASE_URL")); v != "" {
		up[meter.KindOpenAI] = v
	}
	return up
}

// RunUsage is run.json's usage: the agent's totals (calls, input_tokens, output_tokens,
// cache_read_tokens, cache_write_tokens, cost_usd, and how many calls could not be read
// or priced), and the judge's apart.
type RunUsage struct {
	meter.Totals
	// Judge are the judge's calls made grading this run; null when the judge is not
	// metered (JudgeNote says why).
	Judge     *meter.Totals `json:"judge"`
	JudgeNote string        `json:"judge_note,omitempty"`
}

// usageFile is usage.json.
type usageFile struct {
	Agent meter.Usage  `json:"agent"`
	Judge *meter.Usage `json:"judge"`
}

// startMeter starts the agent's meter of a run and returns the environment variables that
// point the agent at it.
func startMeter(mc *MeterConfig) (*meter.Meter, [][2]string, error) {
	m, err := meter.Start(meter.Options{Upstreams: mc.Upstreams, Prices: mc.Prices})
	if err != nil {
		return nil, nil, err
	}
	env := [][2]string{{"ANTHROPIC_BASE_URL", m.BaseURL(meter.KindAnthropic)}, {"OPENAI_BASE_URL", m.BaseURL(meter.KindOpenAI)},
		{"CODEX_BASE_URL", m.BaseURL(meter.KindOpenAI)}}
	return m, env, nil
}

// stopMeter closes the run's meter once the agent is gone and returns what it recorded.
func stopMeter(m *meter.Meter) meter.Usage {
	ctx, cancel := context.WithTimeout(context.Background(), meterClose)
	defer cancel()
	m.Close(ctx)
	return m.Usage()
}

// usageTag is the judge's usage tag of a run: unique in the batch.
func usageTag(in *Info) string {
	return in.Task + "/" + strconv.Itoa(in.Repeat)
}

// recordUsage sets in.Usage from the agent's usage and the judge's calls for the run, and
// writes usage.json into dir.
func recordUsage(mc *MeterConfig, dir string, in *Info, agent meter.Usage) error {
	ru := &RunUsage{Totals: agent.Totals, JudgeNote: mc.JudgeNote}
	uf := usageFile{Agent: agent}
	if mc.Judge != nil {
		j := mc.Judge.UsageOf(usageTag(in))
		ru.Judge, uf.Judge = &j.Totals, &j
	}
	in.Usage = ru
	if uf.Agent.Calls == nil {
		uf.Agent.Calls = []meter.Call{}
	}
	return atomicfile.WriteJSON(filepath.Join(dir, FileUsage), uf, 0o644)
}

// BatchUsage is summary.json's usage: the totals over the runs that were metered.
type BatchUsage struct {
	// Runs is how many runs have a usage; the others (run elsewhere, or before metering)
	// are not in the totals.
	Runs  int          `json:"runs"`
	Agent meter.Totals `json:"agent"`
	// Judge sums the judge's calls; null when no run's judge was metered.
	Judge *meter.Totals `json:"judge"`
}

// addUsage adds one run's usage to the batch's.
func (b *BatchUsage) addUsage(u *RunUsage) {
	if b.Runs == 0 {
		b.Agent = u.Totals
	} else {
		b.Agent = b.Agent.Add(u.Totals)
	}
	if u.Judge != nil {
		if b.Judge == nil {
			j := *u.Judge
			b.Judge = &j
		} else {
			j := b.Judge.Add(*u.Judge)
			b.Judge = &j
		}
	}
	b.Runs++
}

// JudgeTransport is the HTTP transport of a judge whose calls go through the meter m: a
// request to upstream (the judge's endpoint, base path included) is sent to m's route for
// kind instead, which forwards it there and records it; a request elsewhere is refused (a
// call the meter would not see). Errors: upstream is not an absolute http(s) URL.
func JudgeTransport(m *meter.Meter, kind meter.Kind, upstream string) (http.RoundTripper, error) {
	up, err := url.Parse(upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return nil, fmt.Errorf("judge endpoint %q: want an absolute http(s) URL", upstream)
	}
	to, err := url.Parse(m.BaseURL(kind))
	if err != nil || to.Host == "" {
		return nil, fmt.Errorf("the usage meter serves no %s route", kind)
	}
	return &judgeToMeter{up: up, to: to, next: http.DefaultTransport.(*http.Transport).Clone()}, nil
}

type judgeToMeter struct {
	up, to *url.URL
	next   http.RoundTripper
}

func (j *judgeToMeter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := strings.TrimSuffix(j.up.Path, "/")
	if !strings.EqualFold(req.URL.Host, j.up.Host) || req.URL.Scheme != j.up.Scheme || !strings.HasPrefix(req.URL.Path, base+"/") {
		return nil, fmt.Errorf("judge call to %s://%s%s is outside its endpoint %s, so the usage meter would not see it", req.URL.Scheme, req.URL.Host, req.URL.Path, j.up.Redacted())
	}
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host = j.to.Scheme, j.to.Host
	out.URL.Path = strings.TrimSuffix(j.to.Path, "/") + strings.TrimPrefix(req.URL.Path, base)
	out.URL.RawPath = ""
	out.Host = ""
	return j.next.RoundTrip(out)
}
