package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wrapperBin is the wrapper built once by TestMain with `go build`.
var wrapperBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runc-wrapper-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wrapperBin = filepath.Join(dir, "runc-wrapper")
	out, err := exec.Command("go", "build", "-o", wrapperBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fakeRunc writes a shell script standing in for runc: it records its arguments (one a
// line) in DIR/args, copies the bundle's config.json (the bundle being the current
// directory or $FAKE_BUNDLE) and the exec process file ($FAKE_PROCESS) as it sees them
// to DIR/config.json and DIR/process.json, records $PAB_REAL_RUNTIME, and exits with
// $FAKE_EXIT (default 0).
func fakeRunc(t *testing.T) (script, dir string) {
	t.Helper()
	dir = t.TempDir()
	script = filepath.Join(dir, "runc")
	body := `#!/bin/sh
out=` + dir + `
: >"$out/args"
for a in "$@"; do printf '%s\n' "$a" >>"$out/args"; done
b=${FAKE_BUNDLE:-.}
[ -f "$b/config.json" ] && cp "$b/config.json" "$out/config.json"
[ -n "$FAKE_PROCESS" ] && [ -f "$FAKE_PROCESS" ] && cp "$FAKE_PROCESS" "$out/process.json"
printf '%s' "$PAB_REAL_RUNTIME" >"$out/env"
exit ${FAKE_EXIT:-0}
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, dir
}

// config is an OCI config.json with rlimits, an HTML character, a number float64 cannot
// hold, and members podman writes around process.
const config = `{
  "ociVersion": "1.0.2-dev",
  "process": {
    "user": {"uid": 65532, "gid": 65532},
    "args": ["/bin/pab", "--version", "<&>"],
    "env": ["PATH=/usr/bin", "X=é"],
    "cwd": "/",
    "capabilities": {"bounding": ["CAP_CHOWN"]},
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1048576, "soft": 1048576},
                {"type": "RLIMIT_NPROC", "hard": 4194304, "soft": 4194304}],
    "noNewPrivileges": true
  },
  "root": {"path": "/var/lib/containers/storage/overlay/x/merged", "readonly": true},
  "hostname": "c",
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
  "linux": {"resources": {"memory": {"limit": 18446744073709551615}}, "namespaces": [{"type": "network"}]}
}`

// bundle writes config.json with the given content into a fresh directory.
func bundle(t *testing.T, content string) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "config.json"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// runWrapper runs the wrapper with args in cwd and env (added to the test's environment).
func runWrapper(t *testing.T, cwd string, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(wrapperBin, args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), env...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return eb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return eb.String(), 0
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// decode decodes JSON with numbers kept as text.
func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// wantStripped is config decoded, without process.rlimits.
func wantStripped(t *testing.T) map[string]any {
	v := decode(t, []byte(config))
	delete(v["process"].(map[string]any), "rlimits")
	return v
}

func TestCreateStripsRlimitsAndPassesArgs(t *testing.T) {
	fake, out := fakeRunc(t)
	cases := []struct {
		name string
		args func(b string) []string
		cwd  bool // run in the bundle, no --bundle
	}{
		{"--bundle DIR", func(b string) []string {
			return []string{"--root", "/run/runc", "--log", "/x/log.json", "--log-format=json", "--systemd-cgroup", "create", "--bundle", b, "--pid-file", "/x/pid", "ctr1"}
		}, false},
		{"--bundle=DIR", func(b string) []string { return []string{"create", "--bundle=" + b, "ctr1"} }, false},
		{"-b DIR", func(b string) []string { return []string{"--debug", "run", "--detach", "-b", b, "ctr1"} }, false},
		{"current directory", func(string) []string {
			return []string{"--root", "/run/runc", "create", "--pid-file", "/x/pid", "ctr1"}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bundle(t, config)
			args := c.args(b)
			env := []string{"PAB_REAL_RUNTIME=" + fake, "FAKE_BUNDLE=" + b}
			if c.cwd {
				env[1] = "FAKE_BUNDLE=."
			}
			cwd := t.TempDir()
			if c.cwd {
				cwd = b
			}
			if stderr, code := runWrapper(t, cwd, env, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got := readLines(t, filepath.Join(out, "args")); !reflect.DeepEqual(got, args) {
				t.Errorf("runc got args %q, want %q", got, args)
			}
			seen, err := os.ReadFile(filepath.Join(out, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(seen, []byte("rlimits")) || bytes.Contains(seen, []byte("RLIMIT_")) {
				t.Errorf("runc still saw rlimits: %s", seen)
			}
			if got, want := decode(t, seen), wantStripped(t); !reflect.DeepEqual(got, want) {
				t.Errorf("config changed beyond rlimits:\n got %v\nwant %v", got, want)
			}
			if !bytes.Contains(seen, []byte(`"<&>"`)) || !bytes.Contains(seen, []byte("18446744073709551615")) || !bytes.Contains(seen, []byte("é")) {
				t.Errorf("config's strings or numbers were re-encoded: %s", seen)
			}
			st, err := os.Stat(filepath.Join(b, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("config.json mode %v, want 0600", st.Mode().Perm())
			}
			if left, _ := filepath.Glob(filepath.Join(b, ".config.json.*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestExecProcessFile(t *testing.T) {
	fake, out := fakeRunc(t)
	p := filepath.Join(t.TempDir(), "process.json")
	proc := `{"args":["/bin/sh"],"cwd":"/","rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}],"terminal":false}`
	if err := os.WriteFile(p, []byte(proc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--root", "/run/runc", "exec", "--pid-file", "/x/pid", "--process", p, "--detach", "ctr1"}
	if stderr, code := runWrapper(t, t.TempDir(), []string{"PAB_REAL_RUNTIME=" + fake, "FAKE_PROCESS=" + p}, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := readLines(t, filepath.Join(out, "args")); !reflect.DeepEqual(got, args) {
		t.Errorf("runc got args %q, want %q", got, args)
	}
	seen, err := os.ReadFile(filepath.Join(out, "process.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := decode(t, []byte(proc))
	delete(want, "rlimits")
	if got := decode(t, seen); !reflect.DeepEqual(got, want) {
		t.Errorf("process file: got %s, want %v", seen, want)
	}
}

func TestPassThroughAndExitStatus(t *testing.T) {
	fake, out := fakeRunc(t)
	b := bundle(t, config)
	// state, kill and delete do not touch any file; the real runtime's status comes back
	for _, args := range [][]string{
		{"--root", "/run/runc", "state", "ctr1"},
		{"kill", "ctr1", "KILL"},
		{"delete", "--force", "ctr1"},
		{"features"},
	} {
		stderr, code := runWrapper(t, b, []string{"PAB_REAL_RUNTIME=" + fake, "FAKE_EXIT=7"}, args...)
		if code != 7 {
			t.Errorf("%v: exit %d, want 7 (the fake runc's): %s", args, code, stderr)
		}
		if got := readLines(t, filepath.Join(out, "args")); !reflect.DeepEqual(got, args) {
			t.Errorf("runc got args %q, want %q", got, args)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(b, "config.json")); string(data) != config {
		t.Errorf("config.json changed by a pass-through command")
	}
	// a config without rlimits is left byte for byte
	plain := `{"ociVersion":"1.0.2","process":{"args":["x"]}}` + "\n"
	b2 := bundle(t, plain)
	if stderr, code := runWrapper(t, t.TempDir(), []string{"PAB_REAL_RUNTIME=" + fake}, "create", "-b", b2, "c"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(b2, "config.json")); string(data) != plain {
		t.Errorf("config.json without rlimits was rewritten: %q", data)
	}
}

func TestBadInput(t *testing.T) {
	fake, out := fakeRunc(t)
	env := []string{"PAB_REAL_RUNTIME=" + fake}
	big := bundle(t, `{"process":{"args":["`+strings.Repeat("a", maxJSON)+`"]}}`)
	broken := bundle(t, `{"process": [1,2]}`)
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"too large", []string{"create", "--bundle", big, "c"}, env, "larger than 8388608 bytes"},
		{"process not an object", []string{"create", "--bundle", broken, "c"}, env, "process: not a JSON object"},
		{"no config", []string{"create", "--bundle", t.TempDir(), "c"}, env, "config.json: no such file"},
		{"relative runtime", []string{"state", "c"}, []string{"PAB_REAL_RUNTIME=runc"}, "not an absolute path"},
		{"runtime is the wrapper", []string{"state", "c"}, []string{"PAB_REAL_RUNTIME=" + wrapperBin}, "is this wrapper itself"},
	}
	for _, c := range cases {
		os.Remove(filepath.Join(out, "args"))
		stderr, code := runWrapper(t, t.TempDir(), c.env, c.args...)
		if code != 125 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "runc-wrapper: ") {
			t.Errorf("%s: exit %d, stderr %q; want 125 and %q", c.name, code, stderr, c.want)
		}
		if _, err := os.Stat(filepath.Join(out, "args")); err == nil {
			t.Errorf("%s: the real runtime ran", c.name)
		}
	}
}

// TestRuntimeFile: without $PAB_REAL_RUNTIME (as under podman, which does not pass its
// environment on), the wrapper reads WRAPPER.runtime.
func TestRuntimeFile(t *testing.T) {
	fake, out := fakeRunc(t)
	dir := t.TempDir()
	w := filepath.Join(dir, "runc-wrapper")
	data, err := os.ReadFile(wrapperBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w+".runtime", []byte(fake+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := bundle(t, config)
	cmd := exec.Command(w, "create", "--bundle", b, "c")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "FAKE_BUNDLE=" + b} // no PAB_REAL_RUNTIME
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, msg)
	}
	seen, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decode(t, seen), wantStripped(t); !reflect.DeepEqual(got, want) {
		t.Errorf("config: got %v, want %v", got, want)
	}
	// a .runtime file that names a missing file is an error, not a fallback
	if err := os.WriteFile(w+".runtime", []byte("/nonexistent/runc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(w, "state", "c")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	msg, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(msg), "runc-wrapper.runtime: real runtime: stat /nonexistent/runc") {
		t.Errorf("missing runtime: %v %s", err, msg)
	}
}

func TestSubcommandIndex(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"create"}, 0},
		{[]string{"--root", "/r", "--log", "/l", "create"}, 4},
		{[]string{"--root=/r", "-log", "/l", "--debug", "state", "x"}, 4},
		{[]string{"--rootless", "true", "--criu", "c", "--log-format", "text", "kill"}, 6},
		{[]string{"--debug"}, -1},
		{nil, -1},
	} {
		if got := subcommandIndex(c.args); got != c.want {
			t.Errorf("subcommandIndex(%q) = %d, want %d", c.args, got, c.want)
		}
	}
}
