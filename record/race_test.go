//go:build race

package record

// raceEnabled: the race detector slows the program several times over, so the time-bound
// tests (bounds_test.go) put less load on the proxy under it.
const raceEnabled = true
