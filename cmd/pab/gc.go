package main

import (
	"os"
	"runtime/debug"
)

// tuneGC sets the Go collector for a pab command that runs long: GOGC percent under a
// soft memory limit of limit bytes (runtime/debug.SetGCPercent, SetMemoryLimit). The
// environment wins: with GOMEMLIMIT set nothing is changed, with GOGC set only the limit
// is. The limit is not a cap: near it the collector runs more often, and a process that
// holds more goes past it.
func tuneGC(limit int64, percent int) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(limit)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}

// serveMemoryLimit and serveGCPercent are tuneGC's settings for pab replay once it
// serves. A replay's live heap is small (the bench recording's 12 MB under load) and its
// garbage is made per request, so under the default GOGC of 100 the collector runs every
// few thousand requests and its marking was a tenth of the instructions per request
// (docs/performance.md "CPU per request against the baseline, thirteenth part"); at 400
// it runs a quarter as often. Past 51 MiB live (a fifth of the limit) the limit, not GOGC,
// says when the collector runs, and past 128 MiB live it runs more often than under the
// default. Start is not affected: both are set once the proxy listens.
const (
	serveMemoryLimit = 256 << 20
	serveGCPercent   = 400
)
