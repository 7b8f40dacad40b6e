package guard

import (
	"encoding/json"
	"fmt"
)

// Repeat-guard thresholds (seed 001): the same call this many times in a row is not executed
// (the agent is nudged), and this many stops the run.
const (
	RepeatNudgeAt = 3
	RepeatStopAt  = 5
)

// RepeatGuard counts identical consecutive calls: the same tool with the same canonical JSON
// arguments. Any different call resets the count. Not goroutine-safe (the Bridge serializes).
type RepeatGuard struct {
	last  string
	count int
}

// RepeatVerdict is what the guard decided for one call.
type RepeatVerdict int

// The verdicts.
const (
	RepeatOK    RepeatVerdict = iota // execute the call
	RepeatNudge                      // do not execute; tell the agent to change approach
	RepeatStop                       // do not execute; stop the run
)

// Signature is the tool name and its arguments as canonical JSON (object keys sorted, as
// encoding/json does for maps).
func Signature(tool string, args map[string]any) string {
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(fmt.Sprintf("%v", args))
	}
	if args == nil {
		b = []byte("{}")
	}
	return tool + ":" + string(b)
}

// Observe records one call and returns the verdict and the count of identical calls in a
// row, this one included.
func (g *RepeatGuard) Observe(tool string, args map[string]any) (RepeatVerdict, int) {
	sig := Signature(tool, args)
	if sig == g.last {
		g.count++
	} else {
		g.last, g.count = sig, 1
	}
	switch {
	case g.count >= RepeatStopAt:
		return RepeatStop, g.count
	case g.count >= RepeatNudgeAt:
		return RepeatNudge, g.count
	}
	return RepeatOK, g.count
}
