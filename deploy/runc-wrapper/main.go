// Command runc-wrapper is an OCI runtime for podman on kernels that refuse setrlimit (the
// sandboxed machines pab is developed on: crun fails with "setrlimit RLIMIT_NOFILE:
// Operation not permitted", runc with "error setting rlimit type 7"). It takes runc's
// command line unchanged, deletes the process's rlimits from the container's OCI runtime
// configuration, and execs the real runc with the same arguments and environment:
//
//	podman --runtime /path/to/runc-wrapper run --rm --network none IMAGE
//
// What it edits (OCI runtime spec, config.md "POSIX process" and runtime.md "create"):
//
//   - `create` and `run`: BUNDLE/config.json, BUNDLE being the value of --bundle DIR,
//     --bundle=DIR, -b DIR or -b=DIR, or the current directory when none is given (as runc);
//     `process.rlimits` is removed and the file rewritten (a temporary file in the same
//     directory, synced and renamed over it, mode kept: internal/atomicfile); every other
//     member is kept byte for byte (object members are written in sorted order);
//   - `exec`: the process file of --process FILE / -p FILE (a JSON process object), whose
//     top-level `rlimits` is removed the same way.
//
// Files without rlimits are not rewritten. Every other subcommand (start, kill, delete,
// state, features, ...) is passed through untouched. Global flags before the subcommand
// (--root, --log, --log-format, --criu, --rootless, with a value as the next argument or
// after "=") are skipped when looking for it.
//
// The real runtime is, in this order: $PAB_REAL_RUNTIME (podman does not pass its
// environment to the runtime it starts through conmon, so this works only when the
// wrapper is called directly), the path written in the file next to the wrapper named
// like it plus ".runtime" (one line, an absolute path; deploy/podman-env.sh writes it),
// then the first of /usr/bin/runc, /usr/sbin/runc, /usr/local/bin/runc,
// /usr/local/sbin/runc that exists. The wrapper refuses to exec itself.
//
// Limits: a configuration or process file larger than 8 MiB is refused (podman writes
// tens of kB). Errors are one line on stderr starting "runc-wrapper:" and exit status 125
// (podman's "the runtime failed"); the real runtime's own exit status is passed through,
// since it replaces the wrapper (execve).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
)

// maxJSON bounds config.json and exec process files (bytes).
const maxJSON = 8 << 20

// runtimeEnv names the environment variable that selects the real runtime.
const runtimeEnv = "PAB_REAL_RUNTIME"

// defaultRuntimes are tried, in order, when neither $PAB_REAL_RUNTIME nor the ".runtime"
// file names the real runtime.
var defaultRuntimes = []string{"/usr/bin/runc", "/usr/sbin/runc", "/usr/local/bin/runc", "/usr/local/sbin/runc"}

// globalValueFlags are runc's global flags that take a value (runc 1.1, main.go).
var globalValueFlags = map[string]bool{"log": true, "log-format": true, "root": true, "criu": true, "rootless": true}

func main() {
	args := os.Args[1:]
	if err := rewrite(args); err != nil {
		fmt.Fprintln(os.Stderr, "runc-wrapper:", err)
		os.Exit(125)
	}
	real, err := realRuntime()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runc-wrapper:", err)
		os.Exit(125)
	}
	argv := append([]string{real}, args...)
	err = syscall.Exec(real, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "runc-wrapper: exec %s: %v\n", real, err)
	os.Exit(125)
}

// rewrite removes the rlimits from the files that the command line args (runc's, without
// the program name) points at, as described in the package comment.
func rewrite(args []string) error {
	i := subcommandIndex(args)
	if i < 0 {
		return nil
	}
	sub, rest := args[i], args[i+1:]
	switch sub {
	case "create", "run":
		bundle, ok := flagValue(rest, "bundle", "b")
		if !ok || bundle == "" {
			bundle = "."
		}
		return stripFile(filepath.Join(bundle, "config.json"), true)
	case "exec":
		if p, ok := flagValue(rest, "process", "p"); ok && p != "" {
			return stripFile(p, false)
		}
	}
	return nil
}

// subcommandIndex returns the index in args of runc's subcommand: the first argument that
// is not a global flag or a global flag's value; -1 when there is none.
func subcommandIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return i
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if globalValueFlags[name] {
			i++ // its value
		}
	}
	return -1
}

// flagValue finds the value of the flag --long / -short (or -long / --short, as runc's
// flag parser accepts) in a subcommand's arguments: "--long V", "--long=V", "-short V",
// "-short=V". It stops at "--". The last occurrence wins, as in runc.
func flagValue(args []string, long, short string) (string, bool) {
	val, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, v, hasEq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != long && name != short {
			continue
		}
		if hasEq {
			val, found = v, true
		} else if i+1 < len(args) {
			val, found = args[i+1], true
			i++
		}
	}
	return val, found
}

// stripFile removes rlimits from the JSON file at path: process.rlimits when inConfig (an
// OCI config.json), the top-level rlimits otherwise (an exec process file). The file is
// rewritten only when it held rlimits.
func stripFile(path string, inConfig bool) error {
	data, err := readBounded(path)
	if err != nil {
		return err
	}
	out, changed, err := strip(data, inConfig)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return replaceFile(path, out)
}

// readBounded reads path, refusing more than maxJSON bytes.
func readBounded(path string) ([]byte, error) {
	data, err := readlimit.File(path, maxJSON)
	var tl *readlimit.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("%w; not an OCI file podman wrote", err)
	}
	return data, err
}

// strip returns data without the rlimits member (of "process" when inConfig, of the top
// object otherwise) and whether there was one. Other members keep their bytes; object
// members come out in sorted order.
func strip(data []byte, inConfig bool) ([]byte, bool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %w", err)
	}
	if top == nil {
		return nil, false, errors.New("not a JSON object: null")
	}
	if !inConfig {
		if _, ok := top["rlimits"]; !ok {
			return data, false, nil
		}
		delete(top, "rlimits")
		out, err := encode(top)
		return out, true, err
	}
	raw, ok := top["process"]
	if !ok || string(raw) == "null" {
		return data, false, nil
	}
	var proc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &proc); err != nil {
		return nil, false, fmt.Errorf("process: not a JSON object: %w", err)
	}
	if _, ok := proc["rlimits"]; !ok {
		return data, false, nil
	}
	delete(proc, "rlimits")
	p, err := encode(proc)
	if err != nil {
		return nil, false, err
	}
	top["process"] = p
	out, err := encode(top)
	return out, true, err
}

// encode writes v as compact JSON without HTML escaping (so "<" stays "<").
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// replaceFile writes data over path, its mode kept (atomicfile.Write: a temporary file
// beside it, fsync, rename).
func replaceFile(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, st.Mode().Perm())
}

// realRuntime returns the path of the runtime to exec (see the package comment).
func realRuntime() (string, error) {
	self, _ := os.Executable()
	if p := os.Getenv(runtimeEnv); p != "" {
		return checkRuntime(p, self, "$"+runtimeEnv)
	}
	if self != "" {
		side := self + ".runtime"
		if data, err := readBounded(side); err == nil {
			p := strings.TrimSpace(string(data))
			if p == "" || strings.ContainsAny(p, "\n\r") {
				return "", fmt.Errorf("%s: want one line holding the real runtime's absolute path", side)
			}
			return checkRuntime(p, self, side)
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	for _, p := range defaultRuntimes {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return checkRuntime(p, self, "the default")
		}
	}
	return "", fmt.Errorf("no runc found (set $%s, write %s.runtime, or apt-get install runc)", runtimeEnv, self)
}

// checkRuntime checks that p, named by from, is an absolute path to an executable file
// that is not the wrapper itself.
func checkRuntime(p, self, from string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: real runtime %q is not an absolute path", from, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%s: real runtime: %w", from, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: real runtime %s is not an executable file", from, p)
	}
	if self != "" {
		if me, err := os.Stat(self); err == nil && os.SameFile(me, st) {
			return "", fmt.Errorf("%s: real runtime %s is this wrapper itself", from, p)
		}
	}
	return p, nil
}
