//go:build !race

package replay

// raceEnabled is false: see race_test.go.
const raceEnabled = false
