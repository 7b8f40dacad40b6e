package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// startMemProfile writes a heap profile to $PAB_MEMPROFILE when it is set (a developer's
// knob, bench/README.md "Profiling"): the heap is sampled every 2 s and the profile
// rewritten whenever the heap in use is the largest seen, so the file shows what was live
// at the run's peak; with PAB_MEMPROFILE_ALL set every sample is also kept, as
// PATH.<unix time>.<MB in use>MB. The returned function stops the sampling.
func startMemProfile() func() {
	path := os.Getenv("PAB_MEMPROFILE")
	if path == "" {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var peak uint64
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if os.Getenv("PAB_MEMPROFILE_ALL") != "" {
				if f, err := os.Create(fmt.Sprintf("%s.%d.%dMB", path, time.Now().Unix(), ms.HeapInuse>>20)); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
			if ms.HeapInuse <= peak {
				continue
			}
			peak = ms.HeapInuse
			f, err := os.Create(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "pab: PAB_MEMPROFILE:", err)
				return
			}
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}()
	return func() { close(stop); <-done }
}
