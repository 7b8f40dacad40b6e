//go:build !race

package record

// raceEnabled is false: see race_test.go.
const raceEnabled = false
