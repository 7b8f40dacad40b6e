package replay

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestAnswerPathFrames keeps the stack frames of pab's functions under every answer's
// writes small: an answer is written on net/http's connection goroutine, whose stack
// starts at 8 KiB and whose own frames on that path take about 5.5 KiB; when pab's frames
// above them took it over, the stack was grown (copied whole) by an answer, shrunk by the
// collector while the connection waited, and grown again by the next answer: 1.5% of the
// proxy's CPU (docs/performance.md, "seventh part"). The rare paths of these functions live
// in functions of their own. The frame sizes are read from this package's test binary with
// go tool objdump (each function's SUBQ $n, SP); the bound holds with and without the race
// detector (about 1,040 and 620 bytes now; 2,670 and 2,090 before the split).
func TestAnswerPathFrames(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("frame sizes are read from amd64's SUBQ $n, SP")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("go not found")
		}
		t.Skip("go not found")
	}
	funcs := []string{
		"github.com/pab-dev/pab/internal/mitm.(*Server).route",
		"github.com/pab-dev/pab/internal/mitm.(*Server).serveBounded",
		"github.com/pab-dev/pab/internal/mitm.(*watchConn).Write",
		"github.com/pab-dev/pab/replay.(*Server).ServeHTTP",
		"github.com/pab-dev/pab/replay.(*answer).write",
	}
	quoted := make([]string, len(funcs))
	for i, f := range funcs {
		quoted[i] = regexp.QuoteMeta(f)
	}
	// go test strips its binaries' symbols: this package's test binary again, with them,
	// built as this one was (with or without the race detector: cached, only linked)
	bin := filepath.Join(t.TempDir(), "replay.test")
	build := []string{"test", "-c", "-o", bin}
	if raceEnabled {
		build = append(build, "-race")
	}
	if out, err := exec.Command(goTool, append(build, "github.com/pab-dev/pab/replay")...).CombinedOutput(); err != nil {
		t.Fatalf("go test -c: %v: %s", err, out)
	}
	cmd := exec.Command(goTool, "tool", "objdump", "-s", "^("+strings.Join(quoted, "|")+")$", bin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool objdump: %v: %s", err, stderr.String())
	}
	sub := regexp.MustCompile(`SUBQ \$0x([0-9a-f]+), SP`)
	frames := map[string]int{}
	fn := ""
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "TEXT "); ok {
			fn, _, _ = strings.Cut(name, "(SB)")
			continue
		}
		if m := sub.FindStringSubmatch(line); m != nil && fn != "" {
			n, _ := strconv.ParseInt(m[1], 16, 32)
			frames[fn] = int(n)
			fn = ""
		}
	}
	total := 0
	for _, f := range funcs {
		n, ok := frames[f]
		if !ok {
			t.Fatalf("no frame size found for %s in go tool objdump's output (%d bytes)", f, len(out))
		}
		total += n
	}
	const bound = 1280
	if total > bound {
		t.Errorf("the frames under every answer's writes take %d bytes, over %d: %v", total, bound, frames)
	}
}
