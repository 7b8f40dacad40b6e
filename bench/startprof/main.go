// Command startprof profiles what pab replay does before it answers: open the unpacked
// bundle, load the rules, build the index (bench/README.md).
//
//	startprof -bundle DIR -rules DIR[,DIR] [-recording DIR] [-saved FILE] [-cpuprofile F] [-n 5]
//
// It prints the time of each phase, best of -n runs. With -saved, the index is read from
// the saved index FILE (replay.IndexOptions.SavedIndex; written by the first run when it
// is missing or of another key), as pab replay does when nothing changed since the last
// start, and both times are printed: the index computed, and the index read from FILE.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

func main() {
	bundle := flag.String("bundle", "", "unpacked bundle directory")
	rulesDirs := flag.String("rules", "", "rule directories, comma-separated")
	prof := flag.String("cpuprofile", "", "write a CPU profile here")
	n := flag.Int("n", 5, "runs")
	saved := flag.String("saved", "", "a saved index file: also time the index read from it (written first when it does not hold this index)")
	recDir := flag.String("recording", "", "a task's published recording directory: also time recording.HashRecording, which pab does on every start to find the unpacked copy")
	flag.Parse()
	if *bundle == "" {
		fmt.Fprintln(os.Stderr, "startprof: -bundle is required")
		os.Exit(2)
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	var dirs []string
	if *rulesDirs != "" {
		dirs = strings.Split(*rulesDirs, ",")
	}
	best := [3]time.Duration{1 << 62, 1 << 62, 1 << 62}
	for i := 0; i < *n; i++ {
		t0 := time.Now()
		b, err := recording.OpenBundle(*bundle)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t1 := time.Now()
		rs, err := rules.Load(dirs...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t2 := time.Now()
		if _, err := replay.NewIndex(b, rs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t3 := time.Now()
		b.Close()
		best = [3]time.Duration{min(best[0], t1.Sub(t0)), min(best[1], t2.Sub(t1)), min(best[2], t3.Sub(t2))}
	}
	fmt.Printf("open bundle %v, load rules %v, build index %v (best of %d)\n", best[0], best[1], best[2], *n)
	if *saved != "" {
		if err := timeSaved(*bundle, dirs, *saved, *n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *recDir != "" {
		bestHash := time.Duration(1 << 62)
		for i := 0; i < *n; i++ {
			t0 := time.Now()
			if _, err := recording.HashRecording(*recDir); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			bestHash = min(bestHash, time.Since(t0))
		}
		fmt.Printf("hash recording %v (best of %d)\n", bestHash, *n)
	}
}

// timeSaved prints the best time of n index builds that read the saved index file path,
// after one that writes it when it does not hold this index. The key is a fixed one: the
// startprof binary, the bundle and the rules do not change between its runs.
func timeSaved(bundle string, dirs []string, path string, n int) error {
	b, err := recording.OpenBundle(bundle)
	if err != nil {
		return err
	}
	defer b.Close()
	rs, err := rules.Load(dirs...)
	if err != nil {
		return err
	}
	opts := replay.IndexOptions{SavedIndex: path, SavedKey: replay.SavedIndexKey(sha256.Sum256([]byte("startprof " + bundle)))}
	t0 := time.Now()
	ix, err := replay.NewIndex(b, rs, opts)
	if err != nil {
		return err
	}
	firstTime := time.Since(t0)
	ix.WaitSaved() // written after the first answers in pab replay; here before the timed runs
	first := ix.SavedIndexState()
	best := time.Duration(1 << 62)
	state := ""
	for i := 0; i < n; i++ {
		t0 := time.Now()
		ix, err := replay.NewIndex(b, rs, opts)
		if err != nil {
			return err
		}
		best = min(best, time.Since(t0))
		state = ix.SavedIndexState()
	}
	fmt.Printf("index from the saved index %v (best of %d; first run %v: %.40s; then: %s)\n", best, n, firstTime, first, state)
	return nil
}
