// Command pab records, replays, grades and guards web-browsing AI agents.
// See README.md and docs/ for the commands and the formats they read and write.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	// the IANA time zone database, for capture.timezone in images without /usr/share/zoneinfo
	// (the replay image is FROM scratch): about 450 KB
	_ "time/tzdata"
)

func main() {
	stopProfile := startProfile()
	stopMemProfile := startMemProfile()
	root := newRootCmd()
	err := root.Execute()
	stopMemProfile()
	stopProfile()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "pab:", ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "pab:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// startProfile writes a CPU profile of the whole run to $PAB_CPUPROFILE when it is set (a
// developer's knob: bench/README.md "Profiling"); the returned function stops it.
func startProfile() func() {
	path := os.Getenv("PAB_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pab: PAB_CPUPROFILE:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "pab: PAB_CPUPROFILE:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
