//go:build !pab_lite

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/batch"
	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/internal/meter"
)

// runFlags are pab run's flags.
type runFlags struct {
	agent, out, label, guardApp, guardMCP, chrome, clock, collect string
	jobs, repeat                                                  int
	timeout, grace, mcpTimeout                                    time.Duration
	resume, browser, mcp, proxyEnv, meter, view, har              bool
	prices                                                        string
	jf                                                            judgeFlags
}

func newRunCmd(g *globalFlags) *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run --agent CMD [TASK...] | --collect DIR",
		Short: "Run an agent on many tasks, several times each, grade every run and summarize",
		Long:  longHelp("run"),
		Example: `  go build -o bin/refagent ./cmd/refagent
  pab run --agent "$PWD/bin/refagent --plans $PWD/tasks" --repeat 2 --jobs 2 \
      --judge cli --judge-cmd docs/examples/judge.sh books-sapiens-price archive-org-jobs
  pab run --browser --mcp --proxy-env=false --timeout 15m --repeat 3 --jobs 4 \
      --agent "$PWD/agents/claude-playwright.sh"
  pab run --resume --out runs/20261129T215400Z --agent ./my-agent.sh
  pab run --collect /mnt/results --judge api`,
		RunE: func(cmd *cobra.Command, args []string) error { return runBatch(cmd, g, &rf, args) },
	}
	f := cmd.Flags()
	f.StringVar(&rf.agent, "agent", "", "the agent command, run with sh -c in the run directory (see docs/run.md for its environment)")
	f.IntVar(&rf.jobs, "jobs", 1, "runs at once")
	f.IntVar(&rf.repeat, "repeat", 1, "runs per task")
	f.DurationVar(&rf.timeout, "timeout", 0, "time limit of one agent run (e.g. 10m; 0: none); the agent's process group is killed")
	f.DurationVar(&rf.grace, "grace", batch.DefaultGrace, "time between SIGTERM and SIGKILL when the agent's process group is stopped")
	f.StringVar(&rf.out, "out", "", "batch directory (default runs/<UTC time>)")
	f.BoolVar(&rf.resume, "resume", false, "finish the batch in --out: keep its finished runs, run the others")
	f.BoolVar(&rf.browser, "browser", false, "start a headless Chromium through each run's replay and hand its CDP endpoint over (PAB_CDP_URL)")
	f.BoolVar(&rf.mcp, "mcp", false, "with --browser: also start @playwright/mcp attached to each run's Chromium, and start the agent only once it answers tools/list (PAB_MCP_URL, PAB_MCP_TOKEN)")
	f.DurationVar(&rf.mcpTimeout, "mcp-timeout", batch.MCPReadyTimeout, "with --mcp or --guard: how long a run waits for its browser MCP server to be ready; past it the run is an error of kind browser_start and the agent is not started")
	f.BoolVar(&rf.meter, "meter", true, "meter the agent's and the judge's model calls (a loopback pass-through handed to the agent as ANTHROPIC_BASE_URL, OPENAI_BASE_URL and CODEX_BASE_URL): run.json's usage, usage.json, summary.json's totals")
	f.StringVar(&rf.prices, "prices", "", "price table (YAML) that turns tokens into cost (default: the one shipped in pab, internal/meter/prices.yaml)")
	f.BoolVar(&rf.view, "view", true, "with --mcp or --guard: record each browser tool call (steps.jsonl, screenshots) and write the run's view.html; --view=false records nothing")
	f.StringVar(&rf.guardApp, "guard", "", "start pab guard with this application file in front of each run's replay and hand its MCP endpoint over (PAB_MCP_URL)")
	f.StringVar(&rf.guardMCP, "guard-browser-mcp", "", `with --guard: the browser MCP server guard starts instead of @playwright/mcp ("CMD ARGS", pab guard --browser-mcp --unprotected-browser: its browser is not held below the page)`)
	f.StringVar(&rf.chrome, "chrome", "", "Chromium executable for --browser and --guard (default: chromium on PATH)")
	f.BoolVar(&rf.proxyEnv, "proxy-env", true, "also set HTTP_PROXY/HTTPS_PROXY (and lower-case) to the replay for the agent; turn off for agents that call an LLM API themselves")
	f.StringVar(&rf.clock, "clock", "on", "page clock of each replay: on or off, as for pab replay (env RR_CLOCK=off)")
	f.StringVar(&rf.label, "label", "", "name of the agent in summary.json and index.html (default: the --agent command)")
	f.BoolVar(&rf.har, "har", false, "also write each run as a HAR 1.2 file, run.har in its directory: its replay log joined with the recorded answers (docs/replay.md \"A run as a HAR\")")
	f.StringVar(&rf.collect, "collect", "", "grade and summarize the run directories in DIR (a Kubernetes job's results) instead of running an agent")
	rf.jf.add(cmd)
	return cmd
}

// runOutcome prints where the batch is and maps the batch's end to pab's exit status.
func runOutcome(cmd *cobra.Command, sum *batch.Summary, out string, err error) error {
	if sum != nil {
		// The pass rate over every run, then the infrastructure failures and the runs
		// that opened no page, each naming runs to look at.
		for _, l := range sum.Lines() {
			fmt.Fprintln(cmd.OutOrStdout(), "pab run:", l)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "pab run: wrote %s and %s\n", filepath.Join(out, batch.FileSummary), filepath.Join(out, batch.FileIndex))
	}
	if errors.Is(err, batch.ErrInterrupted) {
		return exitError{code: 130, msg: "interrupted; finished runs are kept (--resume " + "--out " + out + " runs the rest)"}
	}
	return flagError(err)
}

// stdoutIsTerminal reports whether w is a character device (a terminal).
func stdoutIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runBatch is pab run: a batch of runs (batch.Batch) or, with --collect, the grading of
// runs made elsewhere (batch.Collect).
func runBatch(cmd *cobra.Command, g *globalFlags, rf *runFlags, args []string) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	repo, err := g.findRepo()
	if err != nil {
		return err
	}
	if err := grade.ValidSamples(rf.jf.samples); err != nil {
		return flagError(err)
	}
	clockOn, err := clockSetting(rf.clock, cmd.Flags().Changed("clock"), os.Getenv("RR_CLOCK"))
	if err != nil {
		return err
	}
	h := &batch.Local{Repo: repo, Clock: clockOn, Warn: cmd.ErrOrStderr(), Samples: rf.jf.samples,
		OpenJudge: func() (*grade.Cache, error) { return rf.jf.open(repo) }}
	live := stdoutIsTerminal(cmd.OutOrStdout())
	if rf.collect != "" {
		for _, name := range []string{"agent", "out", "resume", "browser", "mcp", "mcp-timeout", "guard", "repeat", "timeout", "grace", "proxy-env", "meter", "prices"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("run: --%s does not go with --collect (it grades runs already made)", name)
			}
		}
		if len(args) > 0 {
			return errors.New("run --collect: takes no TASK arguments (the tasks are the directories of DIR)")
		}
		sum, err := batch.Collect(ctx, batch.CollectConfig{Harness: h, Dir: rf.collect, Jobs: rf.jobs,
			Progress: cmd.OutOrStdout(), Live: live, Label: rf.label})
		return runOutcome(cmd, sum, rf.collect, err)
	}
	if rf.agent == "" {
		return errors.New("run: --agent CMD is required (the agent command, run with sh -c; see docs/run.md)")
	}
	if rf.browser && rf.guardApp != "" {
		return errors.New("run: give --browser or --guard, not both (guard starts its own browser)")
	}
	if rf.timeout < 0 {
		return fmt.Errorf("run: --timeout %s: want 0 (none) or more", rf.timeout)
	}
	if rf.mcp && !rf.browser {
		return errors.New("run: --mcp goes with --browser (it starts @playwright/mcp on the run's Chromium; --guard hands pab guard over ready by itself)")
	}
	if rf.mcpTimeout <= 0 {
		return fmt.Errorf("run: --mcp-timeout %s: want more than 0", rf.mcpTimeout)
	}
	h.MCP, h.MCPTimeout, h.NoSteps = rf.mcp, rf.mcpTimeout, !rf.view
	tasks, err := batch.RepoTasks(repo, args)
	if err != nil {
		return err
	}
	if rf.browser {
		if h.Chrome, err = findChromium(rf.chrome); err != nil {
			return err
		}
	}
	if rf.guardApp != "" {
		exe, exeErr := os.Executable()
		if err := h.UseGuard(rf.guardApp, rf.guardMCP, rf.chrome, exe); err != nil {
			return flagError(err)
		}
		if exeErr != nil {
			return fmt.Errorf("run: --guard needs pab's own path: %w", exeErr)
		}
	} else if rf.guardMCP != "" {
		return errors.New("run: --guard-browser-mcp needs --guard")
	}
	if rf.out == "" {
		rf.out = filepath.Join("runs", time.Now().UTC().Format("20060102T150405Z"))
	}
	var mc *batch.MeterConfig
	if rf.meter {
		if mc, err = startRunMeters(&rf.jf, rf.prices); err != nil {
			return err
		}
		if mc.Judge != nil {
			defer mc.Judge.Close(context.Background())
		}
	} else if cmd.Flags().Changed("prices") {
		return errors.New("run: --prices goes with metering (--meter)")
	}
	sum, err := batch.Batch(ctx, batch.Config{Harness: h, Tasks: tasks, Repeat: rf.repeat, Jobs: rf.jobs,
		Agent: rf.agent, Timeout: rf.timeout, Grace: rf.grace, Out: rf.out, Resume: rf.resume, ProxyEnv: rf.proxyEnv,
		Progress: cmd.OutOrStdout(), Live: live, Label: rf.label, Meter: mc})
	if rf.har && sum != nil {
		writeRunHARs(cmd, repo, rf.out, sum)
	}
	return runOutcome(cmd, sum, rf.out, err)
}

// startRunMeters loads the price table (pricesPath, "" for the shipped one) and starts the
// judge's usage meter for a batch: an api or openai judge's calls go through it (jf's
// transport); a CLI judge's cannot be seen, which MeterConfig.JudgeNote says. The agents'
// meters are started per run by batch.
func startRunMeters(jf *judgeFlags, pricesPath string) (*batch.MeterConfig, error) {
	prices, err := meter.OpenPrices(pricesPath)
	if err != nil {
		return nil, fmt.Errorf("run: --prices: %w", err)
	}
	mc := &batch.MeterConfig{Upstreams: batch.AgentUpstreams(os.Getenv), Prices: prices}
	kind := strings.ToLower(jf.kind)
	if kind == "" {
		kind = "cli"
		if os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("ANTHROPIC_AUTH_TOKEN") != "" {
			kind = "api"
		}
	}
	var mk meter.Kind
	var upstream string
	switch kind {
	case "api", "anthropic":
		mk, upstream = meter.KindAnthropic, firstNonEmpty(jf.baseURL, os.Getenv("ANTHROPIC_BASE_URL"), meter.DefaultAnthropicURL)
	case "openai":
		mk, upstream = meter.KindOpenAI, firstNonEmpty(jf.baseURL, os.Getenv("OPENAI_BASE_URL"), meter.DefaultOpenAIURL)
	default:
		mc.JudgeNote = "the judge is a command (--judge cli): its model calls are its own program's, not seen by pab"
		return mc, nil
	}
	jm, err := meter.Start(meter.Options{Upstreams: map[meter.Kind]string{mk: upstream}, Prices: prices})
	if err != nil {
		return nil, fmt.Errorf("run: the judge's usage meter: %w", err)
	}
	if jf.transport, err = batch.JudgeTransport(jm, mk, upstream); err != nil {
		jm.Close(context.Background())
		return nil, fmt.Errorf("run: the judge's usage meter: %w", err)
	}
	mc.Judge = jm
	return mc, nil
}

// firstNonEmpty returns the first of vs that is not blank.
func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
