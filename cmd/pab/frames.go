//go:build !pab_lite

package main

import (
	"io"
	"mime"

	"github.com/pab-dev/pab/grade"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/warc"
)

// maxFrameScan bounds how much of a recorded document pageFrames reads for its frames.
const maxFrameScan = 8 << 20

// pageFrames maps the recorded exchanges that answered document requests of the log
// (entry ids) to the frames their HTML embeds (grade.FrameSources), for grade.Input.Frames.
// Only 2xx HTML answers are read, each once, at most maxFrameScan bytes of it; documents
// without frames are left out.
func pageFrames(b *warc.Bundle, lines []replay.LogLine) map[string][]string {
	out := map[string][]string{}
	done := map[string]bool{}
	for i := range lines {
		l := &lines[i]
		if l.Entry == "" || l.Type != replay.TypeDocument || done[l.Entry] {
			continue
		}
		done[l.Entry] = true
		e := b.ByID(l.Entry)
		if e == nil {
			continue
		}
		resp, err := b.Response(e)
		if err != nil || resp.Status < 200 || resp.Status > 299 {
			continue
		}
		if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || (mt != "text/html" && mt != "application/xhtml+xml") {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxFrameScan))
		if err != nil {
			continue
		}
		if fs := grade.FrameSources(body, e.URL); len(fs) > 0 {
			out[l.Entry] = fs
		}
	}
	return out
}
