package recording

import (
	"fmt"
	"regexp"

	"github.com/pab-dev/pab/internal/words"
)

// warnAt matches an import warning about one record: "FILE at offset N: MSG" or
// "FILE at offset N (uncompressed M): MSG" (Record.Where).
var warnAt = regexp.MustCompile(`^(.*?) at (offset [0-9]+(?: \(uncompressed [0-9]+\))?): (.*)$`)

// collapseWarnings returns ws with the warnings that say the same thing of different
// records of one file (same FILE and MSG in "FILE at offset N: MSG") made one line, at
// the place of the first: "FILE at offset N: MSG (the same in K more records of FILE, the
// last at offset M)". A capture whose 171 request blocks all lack the empty line ending
// their head then gives one line, not 171. Other warnings are kept as they are, in order.
func collapseWarnings(ws []string) []string {
	type group struct {
		first int // index in out
		more  int
		last  string
	}
	groups := map[[2]string]*group{}
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		m := warnAt.FindStringSubmatch(w)
		if m == nil {
			out = append(out, w)
			continue
		}
		k := [2]string{m[1], m[3]}
		if g, ok := groups[k]; ok {
			g.more++
			g.last = m[2]
			continue
		}
		groups[k] = &group{first: len(out)}
		out = append(out, w)
	}
	for k, g := range groups {
		if g.more > 0 {
			out[g.first] += fmt.Sprintf(" (the same in %d more %s of %s, the last at %s)", g.more, words.Plural(g.more, "record"), k[0], g.last)
		}
	}
	return out
}
