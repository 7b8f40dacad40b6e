package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCAConcurrentProcesses starts 8 `pab ca --spki` processes at once on an empty cache,
// three times over: all must succeed and print the same SPKI hash, and the CA directory
// must hold the two files and nothing beside them.
func TestCAConcurrentProcesses(t *testing.T) {
	for round := range 3 {
		cache := filepath.Join(t.TempDir(), "cache")
		const n = 8
		cmds := make([]*exec.Cmd, n)
		outs := make([]*bytes.Buffer, n)
		errs := make([]*bytes.Buffer, n)
		for i := range cmds {
			cmds[i] = exec.Command(pabBin, "--repo", repoRoot, "ca", "--spki")
			cmds[i].Env = append(os.Environ(), "PAB_CACHE="+cache, "PAB_REPO=")
			outs[i], errs[i] = new(bytes.Buffer), new(bytes.Buffer)
			cmds[i].Stdout, cmds[i].Stderr = outs[i], errs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d: pab ca %d: %v\n%s", round, i, err, errs[i])
			}
			if got, want := strings.TrimSpace(outs[i].String()), strings.TrimSpace(outs[0].String()); got != want || got == "" {
				t.Fatalf("round %d: pab ca %d printed %q, the first %q", round, i, got, want)
			}
		}
		ents, err := os.ReadDir(filepath.Join(cache, "ca"))
		if err != nil || len(ents) != 2 {
			t.Fatalf("round %d: CA directory: %v, %d entries", round, err, len(ents))
		}
		if left, _ := filepath.Glob(filepath.Join(cache, ".ca.tmp-*")); len(left) > 0 {
			t.Fatalf("round %d: left behind: %v", round, left)
		}
	}
}
