package main

// The first hour of a new user (issue 34): the README's commands run on a fresh copy of the
// repository, and the lines a newcomer reads first (help texts, README) say what the code
// does. docs/testing.md "The newcomer test".

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/testtool"
	"github.com/pab-dev/pab/recording"
)

// freshClone copies the files git tracks (as they are in the working tree) into a new
// directory: what a clone of this tree holds, without bin/, .cache/ or anything ignored.
func freshClone(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testtool.Missing(t, "git not found (Debian: apt-get install git)")
	}
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		testtool.Missing(t, "%s is not a git checkout (git ls-files: %v)", repoRoot, err)
	}
	dst := filepath.Join(t.TempDir(), "pab")
	for _, rel := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(repoRoot, rel)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(src)
			if err := os.Symlink(l, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// readmeBlocks returns the commands of README.md's ```bash blocks, one string per command
// (continuation lines joined, comment lines dropped), block by block.
func readmeBlocks(t *testing.T, readme string) [][]string {
	t.Helper()
	var blocks [][]string
	var cur []string
	in, pending := false, ""
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case line == "```bash":
			in, cur = true, nil
			continue
		case in && line == "```":
			in = false
			blocks = append(blocks, cur)
			continue
		case !in || strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "":
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			pending += s
			continue
		}
		cur = append(cur, pending+line)
		pending = ""
	}
	return blocks
}

// newcomerEnv is the environment of a new user: CI=true, their own empty data and cache
// directories (so pab makes its CA there), no PAB_* variables, and this machine's Go caches
// kept (a newcomer's cold Go cache is measured in README, not here).
func newcomerEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PAB_") || k == "XDG_DATA_HOME" || k == "XDG_CACHE_HOME" || k == "CI" {
			continue
		}
		env = append(env, kv)
	}
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	return append(env, "CI=true", "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"))
}

// shell runs one README command with bash in dir and returns stdout, stderr and the exit
// code; it fails the test when bash cannot run.
func shell(t *testing.T, dir string, env []string, command string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return stdout.String(), stderr.String(), code
}

// anyListenLine is the banner of pab replay naming its address, on any interface.
var anyListenLine = regexp.MustCompile(`on http://(\S+)$`)

// background is a README command that keeps running (a proxy).
type background struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer   // written by the reader of its stderr, read by the test
	exited chan struct{} // closed once the command has been waited for
}

// startBackground starts command with bash, its own process group, and waits (at most 2
// minutes) for its "on http://ADDR" line.
func startBackground(t *testing.T, dir string, env []string, command string) *background {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+command)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	b := &background{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		said := false
		for sc.Scan() {
			b.stderr.Write([]byte(sc.Text() + "\n"))
			if m := anyListenLine.FindStringSubmatch(sc.Text()); m != nil && !said {
				found <- m[1]
				said = true
			}
		}
	}()
	go func() { cmd.Wait(); pw.Close(); close(b.exited) }()
	select {
	case b.addr = <-found:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s printed no address in 2 minutes", command)
	}
	return b
}

// stop sends SIGINT (Ctrl-C) and waits for the exit; it must be 0.
func (b *background) stop(t *testing.T) {
	t.Helper()
	b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.exited:
	case <-time.After(time.Minute):
		t.Fatal("no exit a minute after Ctrl-C")
	}
	if !b.cmd.ProcessState.Success() {
		t.Errorf("exit %v after Ctrl-C", b.cmd.ProcessState)
	}
}

// TestNewcomerREADME runs the README's commands, as written, on a fresh copy of the
// repository with CI=true: the lite build's go run --check (100% exact; it writes nothing
// but the saved index in .cache/indexes), the lite build, pab tasks, a replay with a log,
// curl through it with pab's CA, the control API, pab stats and inspect after Ctrl-C; then,
// with the full build (the binary of these tests, built from the same tree), the grading
// example and an import and replay of a WARC. Commands that go to the internet (pab record)
// or open a window (chromium, checked in TestHelpNamesFormat) are not run.
func TestNewcomerREADME(t *testing.T) {
	clone := freshClone(t)
	env := newcomerEnv(t)
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))
	if len(blocks) < 5 {
		t.Fatalf("README has %d bash blocks", len(blocks))
	}
	tmp := t.TempDir()
	subst := strings.NewReplacer("/tmp/replay.jsonl", filepath.Join(tmp, "replay.jsonl"), "/tmp/run", filepath.Join(tmp, "run"))
	// crawl.warc.gz, the README's WARC to import: a public test capture of the corpus
	data, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "warc", "example.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "crawl.warc.gz"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var proxy *background
	ran := 0
	for bi, block := range blocks {
		for _, line := range block {
			command := subst.Replace(line)
			if proxy != nil {
				command = strings.ReplaceAll(command, "127.0.0.1:8899", proxy.addr)
			}
			fields := strings.Fields(command)
			switch {
			case fields[0] == "chromium", fields[0] == "./scripts/test.sh",
				len(fields) > 1 && fields[0] == "bin/pab" && fields[1] == "record":
				continue
			case fields[0] == "bin/pab" && fields[1] == "replay" && !strings.Contains(command, "--check"):
				proxy = startBackground(t, clone, env, command+" --listen 127.0.0.1:0")
				ran++
				if fields[2] == "my-task" { // the import block: a replay of the imported task
					proxy.stop(t)
					proxy = nil
				}
				continue
			case fields[0] == "bin/pab" && (fields[1] == "stats" || fields[1] == "grade") && proxy != nil:
				proxy.stop(t) // "after Ctrl-C"
				proxy = nil
			}
			if fields[0] == "bin/pab" && (fields[1] == "grade" || fields[1] == "import") {
				// the full build: the examples after the browse block need it
				full, err := os.ReadFile(pabBin)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(clone, "bin", "pab"), full, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			stdout, stderr, code := shell(t, clone, env, command)
			ran++
			if code != 0 {
				t.Fatalf("block %d: %s: exit %d\nstdout:\n%s\nstderr:\n%s", bi+1, line, code, stdout, stderr)
			}
			check := map[string]string{
				"replay books-sapiens-price --check":   "hit rate: exact 100.0%",
				"bin/pab tasks":                        "lil-former-projects",
				`--cacert "$(bin/pab ca)" https://lil`: "<html",
				"http://rr.control/stats":              `"exact"`,
				"bin/pab stats":                        "exact",
				"bin/pab inspect":                      "lil.law.harvard.edu",
				"bin/pab import":                       "imported crawl.warc.gz",
			}
			for key, want := range check {
				if strings.Contains(line, key) && !strings.Contains(stdout, want) {
					t.Errorf("%s: stdout lacks %q:\n%s\nstderr:\n%s", line, want, stdout, stderr)
				}
			}
			if strings.Contains(line, "--check") {
				// the README: nothing is unpacked; the only file written is the saved index
				filepath.WalkDir(filepath.Join(clone, ".cache"), func(p string, de os.DirEntry, err error) error {
					if err == nil && !de.IsDir() && !regexp.MustCompile(`/\.cache/indexes/[0-9a-f]+\.idx$`).MatchString(p) {
						t.Errorf("the quick start wrote %s", p)
					}
					return nil
				})
			}
		}
	}
	if proxy != nil {
		proxy.stop(t)
	}
	if _, err := os.Stat(filepath.Join(tmp, "run", "report.html")); err != nil {
		t.Errorf("the grading example wrote no report: %v", err)
	}
	if _, err := os.Stat(filepath.Join(clone, "tasks", "my-task", "recording", recording.RecordingManifestFile)); err != nil {
		t.Errorf("the import example made no recording: %v", err)
	}
	if ran < 10 {
		t.Errorf("only %d README commands ran", ran)
	}
}

// TestFirstHourLines: the lines issue 34 found untrue on a fresh clone: pab replay of a file
// that is no WARC says so; a WARC replayed outside a repository is unpacked into the
// per-user cache, not the current directory; a --listen on every interface warns naming
// what it exposes; pab record with its port taken leaves no journal.
func TestFirstHourLines(t *testing.T) {
	env := newcomerEnv(t)
	cache := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_CACHE_HOME="); ok {
			cache = v
		}
	}
	run := func(dir string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(pabBin, args...)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return stdout.String(), stderr.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), 0
	}

	_, stderr, code := run(repoRoot, "replay", "README.md")
	if code != 1 || !strings.Contains(stderr, "target README.md: the file exists but is not a WARC file") {
		t.Errorf("pab replay README.md: exit %d, %q", code, stderr)
	}

	bare := t.TempDir() // no tasks/, no sites/: no repository
	warcPath := filepath.Join(repoRoot, "testdata", "warc", "example.warc.gz")
	if _, stderr, code := run(bare, "replay", warcPath, "--check"); code != 0 {
		t.Fatalf("replay of a WARC outside a repository: exit %d\n%s", code, stderr)
	}
	if des, _ := os.ReadDir(bare); len(des) != 0 {
		t.Errorf("the replay wrote into the current directory: %v", des)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "pab", "bundles", "warc-*", recording.ManifestFile)); len(m) != 1 {
		t.Errorf("no unpacked copy in the per-user cache %s: %v", filepath.Join(cache, "pab"), m)
	}

	repo := t.TempDir()
	copyTask(t, "books-sapiens-price", repo)
	p := startBackground(t, repo, env, strconv.Quote(pabBin)+" replay books-sapiens-price --listen 0.0.0.0:0")
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "pab replay: warning: listening on [::]:") && !strings.Contains(p.stderr.String(), "pab replay: warning: listening on 0.0.0.0:") ||
		!strings.Contains(p.stderr.String(), "the recording (every recorded page and cookie) and the control API") {
		t.Errorf("no warning for a replay on every interface:\n%s", p.stderr.String())
	}
	p = startBackground(t, repo, env, strconv.Quote(pabBin)+" replay books-sapiens-price --listen 127.0.0.1:0")
	p.stop(t)
	if strings.Contains(p.stderr.String(), "warning") {
		t.Errorf("a loopback replay warned:\n%s", p.stderr.String())
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code = run(repo, "record", "--task", "x", "--listen", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "address already in use") {
		t.Errorf("record on a taken port: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, ".cache", "record", "x")); !os.IsNotExist(err) {
		t.Errorf("record on a taken port left its work directory: %v", err)
	}
}

// formatMention is "format N" in prose.
var formatMention = regexp.MustCompile(`\bformat (\d+)\b`)

// TestHelpNamesFormat: pab --help, pab import --help and the README name the current
// recording format (recording.RecordingFormat); no help text of any command and no line of the
// README names another number, except where it says the format is older or earlier; the
// help files carry no number but format 1's (help.go puts them in from warc's constants),
// so they cannot go stale. The
// Chromium lines of the README and of pab record/ca --help are internal/browser's one
// command line.
func TestHelpNamesFormat(t *testing.T) {
	cur := strconv.Itoa(recording.RecordingFormat)
	root := newRootCmd()
	helps := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var buf bytes.Buffer
		c.SetOut(&buf)
		if err := c.Help(); err != nil {
			t.Fatal(err)
		}
		helps[c.CommandPath()] = buf.String()
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(helps) < 20 {
		t.Fatalf("only %d commands", len(helps))
	}
	for _, name := range []string{"pab", "pab import", "pab recording migrate"} {
		if !strings.Contains(helps[name], "format "+cur) {
			t.Errorf("%s --help does not name format %s", name, cur)
		}
	}
	older := regexp.MustCompile(`(?i)older|earlier|before|migrat|from format`)
	for name, h := range helps {
		for _, line := range strings.Split(h, "\n") {
			for _, m := range formatMention.FindAllStringSubmatch(line, -1) {
				if m[1] != cur && !older.MatchString(line) && name != "pab recording migrate" {
					t.Errorf("%s --help names format %s: %q", name, m[1], line)
				}
			}
		}
	}
	files, _ := filepath.Glob("help/*.txt")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, m := range formatMention.FindAllSubmatch(data, -1) {
			if string(m[1]) != "1" { // format 1, the first layout, is history and stays 1
				t.Errorf("%s names %q; write %s or %s so the number comes from warc", f, m[0], formatWord, formatWord2)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "format "+cur) {
		t.Errorf("README does not name format %s", cur)
	}
	for i, line := range strings.Split(string(readme), "\n") {
		for _, m := range formatMention.FindAllStringSubmatch(line, -1) {
			if m[1] != cur && !older.MatchString(line) {
				t.Errorf("README.md:%d names format %s: %q", i+1, m[1], line)
			}
		}
	}
	for _, u := range []string{"https://lil.law.harvard.edu/projects/", "https://books.toscrape.com/"} {
		want := browser.ShellCommand(browser.Options{Proxy: "127.0.0.1:8899", SPKI: "$(bin/pab ca --spki)", Profile: "$(mktemp -d)", Headed: true}, u, "  ")
		if !strings.Contains(string(readme), want+"\n") {
			t.Errorf("README lacks internal/browser's Chromium line for %s:\n%s", u, want)
		}
	}
	for _, name := range []string{"pab record", "pab ca"} {
		if !strings.Contains(helps[name], "--disable-features="+browser.FeaturesOff) || !strings.Contains(helps[name], "--no-sandbox") {
			t.Errorf("%s --help lacks the whole Chromium line or the --no-sandbox note:\n%s", name, helps[name])
		}
	}
}
