// Package proctree measures a process and all its descendants from Linux's /proc, for the
// benchmark programs (bench/load -watch, bench/pageload -watch): the CPU time they used
// and their resident memory, summed over the tree.
package proctree

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats returns the CPU seconds (user + system, proc(5) stat fields 14 and 15 in
// USER_HZ = 100 ticks a second) and the resident set size in bytes (field 24, in pages)
// of pid and every process descending from it, read from /proc/*/stat now. Processes that
// end while /proc is read are left out; an unknown pid gives zeros.
func Stats(pid int) (cpu float64, rss int64) {
	children := map[int][]int{}
	stats := map[int][]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: split after the last ')'.
		s := string(data)
		j := strings.LastIndexByte(s, ')')
		if j < 0 {
			continue
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 22 {
			continue
		}
		stats[p] = f
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	const tick = 100.0 // USER_HZ on Linux
	page := int64(os.Getpagesize())
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if f, ok := stats[p]; ok {
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			cpu += (ut + st) / tick
			pages, _ := strconv.ParseInt(f[21], 10, 64)
			rss += pages * page
		}
		queue = append(queue, children[p]...)
	}
	return cpu, rss
}
