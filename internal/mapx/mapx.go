// Package mapx holds the one map helper more than one package needs: a map's keys in a
// fixed order for printing.
package mapx

import (
	"cmp"
	"slices"
)

// OrderedKeys returns the keys of m: first those of prefer that m has, in prefer's order,
// then the rest in ascending order. Each key is returned once.
func OrderedKeys[K cmp.Ordered, V any](m map[K]V, prefer []K) []K {
	out := make([]K, 0, len(m))
	seen := make(map[K]bool, len(prefer))
	for _, k := range prefer {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	rest := make([]K, 0, len(m)-len(out))
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
