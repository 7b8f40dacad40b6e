//go:build race

package mitm

// raceEnabled: the race detector slows the program several times over (and multiplies
// its memory), so TestSlowClientsBounded puts a third of the load on its child.
const raceEnabled = true
