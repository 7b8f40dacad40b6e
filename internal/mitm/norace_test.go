//go:build !race

package mitm

// raceEnabled is false: see race_test.go.
const raceEnabled = false
