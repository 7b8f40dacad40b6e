package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLiteBuild builds pab with -tags pab_lite, as deploy/build-images.sh does for the
// replay and browser images, and checks that it replays a shipped task exactly, is much
// smaller than the full build, and says plainly that the commands it leaves out are not
// there.
func TestLiteBuild(t *testing.T) {
	lite := filepath.Join(t.TempDir(), "pab-lite")
	build := exec.Command("go", "build", "-tags", "pab_lite", "-o", lite, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags pab_lite: %v\n%s", err, out)
	}
	cmd := exec.Command(lite, "--repo", repoRoot, "replay", "books-sapiens-price", "--check")
	cmd.Env = append(os.Environ(), "PAB_CACHE="+cacheDir, "PAB_REPO=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "exact          30  100.0%") {
		t.Fatalf("lite pab replay --check: %v\n%s", err, out)
	}
	liteInfo, err1 := os.Stat(lite)
	fullInfo, err2 := os.Stat(pabBin)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if liteInfo.Size()*3 > fullInfo.Size() {
		t.Errorf("lite build %d bytes, full build %d: want the lite one under a third", liteInfo.Size(), fullInfo.Size())
	}
	out, err = exec.Command(lite, "grade", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown command "grade"`) {
		t.Errorf("lite pab grade: %v\n%s", err, out)
	}
}
