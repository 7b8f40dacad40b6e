package recording

// audit_stream.go: the audit of a bundle's content in step: data.warc's records and
// entries.jsonl's lines read together, one of each at a time, so that auditing a recording
// of a million records holds a few keys per entry (entryAuditor) instead of every record
// (docs/import.md "Limits and memory").

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pab-dev/pab/warc"
)

// auditContentStream is auditContent reading data.warc and entries.jsonl together: every
// bundle pab writes names its records in archive order (each entry's response, then its
// request, at increasing offsets), so each record is checked, matched with the entry that
// names it and let go before the next is read. It gives the problems auditContent gives,
// in the same order. ok is false, with nothing done that counts, when the files cannot be
// opened or an entry names a record at or before one an earlier lookup passed: auditContent
// then audits the bundle with every record in memory.
func auditContentStream(ctx context.Context, dir string, names auditNames) (probs []Problem, ok bool) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, false
	}
	defer root.Close()
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return nil, false
	}
	defer wf.Close()
	ef, err := openBundleFile(root, dir, EntriesFile)
	if err != nil {
		return nil, false
	}
	defer ef.Close()
	fi, err := wf.Stat()
	if err != nil {
		return nil, false
	}
	return auditContentStreamFrom(ctx, root, dir, names, ef, wf, fi.Size(), wf)
}

// auditContentStreamFrom is auditContentStream reading data.warc from src: size bytes of
// it, or (size < 0) up to src's end, as while data.warc is being written (the audit of a
// format 3 recording, in step with the inflating of its members). ra reads a record
// already passed, for a message (an error there only leaves the record's id out); ef is
// entries.jsonl; root and dir hold pages.jsonl.
func auditContentStreamFrom(ctx context.Context, root *os.Root, dir string, names auditNames, ef io.Reader, src io.Reader, size int64, ra io.ReaderAt) (probs []Problem, ok bool) {
	br := bufio.NewReaderSize(src, 256<<10)

	var scanProbs, entryProbs, noEntry []Problem
	var ifWhole []bool // per entry problem: it holds only when the whole archive scans
	scanFailed := false
	var off int64
	var cur *auditRec // the first record not yet passed; nil at the end or after a failure
	next := func() {
		cur = nil
		if scanFailed || (size >= 0 && off >= size) {
			return
		}
		if size < 0 {
			if _, err := br.Peek(1); err == io.EOF {
				return
			} else if err != nil {
				scanProbs = append(scanProbs, Problem{File: names.warc, Where: fmt.Sprintf("offset %d", off), Msg: err.Error() + "; the rest of the file is not checked"})
				scanFailed = true
				return
			}
		}
		rec, recProbs, err := scanRecord(br, off, names.warc)
		scanProbs = append(scanProbs, recProbs...)
		if err != nil {
			scanProbs = append(scanProbs, Problem{File: names.warc, Where: fmt.Sprintf("offset %d", off), Msg: err.Error() + "; the rest of the file is not checked"})
			scanFailed = true
			return
		}
		cur = rec
		off += rec.length
	}
	// records passed while one line's lookups run stay in recent until the line is done
	// (an entry looks up its request record, then its response record before it)
	var recent []*auditRec
	settle := func(r *auditRec) {
		if r.referencedFrom == "" {
			noEntry = append(noEntry, Problem{File: names.warc, Where: recWhere(r), Msg: fmt.Sprintf("%s record is in no entry of %s", r.typ, EntriesFile)})
		}
	}
	next()
	floor := int64(-1) // every offset the earlier lines looked up is at most this
	lineMax := int64(-1)
	inOrder := true
	notFound := false // the last find said its offset starts no record
	find := func(what string, at, length int64) (*auditRec, string) {
		if at <= floor {
			inOrder = false
		}
		lineMax = max(lineMax, at)
		var rec *auditRec
		for _, r := range recent {
			if r.off == at {
				rec = r
			}
		}
		for rec == nil && inOrder && cur != nil && cur.off < at {
			recent = append(recent, cur)
			next()
		}
		if rec == nil && inOrder && cur != nil && cur.off == at {
			rec = cur
		}
		if rec == nil {
			notFound = true
			return nil, fmt.Sprintf("%sOffset %d is not the start of a record", what, at)
		}
		if rec.length != length {
			return rec, fmt.Sprintf("%sLength %d, but the record at %d is %d bytes", what, length, at, rec.length)
		}
		return rec, ""
	}
	recordID := func(roff, n int64) string {
		lines, _, err := warc.ReadHead(bufio.NewReader(io.NewSectionReader(ra, roff, n)), warc.MaxWARCHeaderBytes, false)
		if err != nil {
			return ""
		}
		h, err := warc.ParseWARCHead(lines)
		if err != nil {
			return ""
		}
		return h.Fields.Get("WARC-Record-ID")
	}
	a := newEntryAuditor(names, recordID)
	line, err := scanLines(ef, MaxEntryLineBytes, func(line int, data []byte) error {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		a.line(line, data, find, func(p Problem) {
			entryProbs = append(entryProbs, p)
			ifWhole = append(ifWhole, notFound)
			notFound = false
		})
		notFound = false
		if !inOrder {
			return errNotInArchiveOrder
		}
		floor = max(floor, lineMax)
		for _, r := range recent {
			settle(r)
		}
		recent = recent[:0]
		return nil
	})
	if !inOrder {
		return nil, false
	}
	if err != nil {
		entryProbs = append(entryProbs, Problem{File: names.entries, Where: fmt.Sprintf("line %d", line), Msg: err.Error() + "; the rest of the file is not checked"})
		ifWhole = append(ifWhole, false)
	}
	for _, r := range recent {
		settle(r)
	}
	for cur != nil {
		settle(cur)
		next()
	}
	probs = scanProbs
	for i, p := range entryProbs {
		if !scanFailed || !ifWhole[i] {
			probs = append(probs, p)
		}
	}
	if !scanFailed {
		probs = append(probs, noEntry...)
	}
	if pf, err := openBundleFile(root, dir, PagesFile); err != nil {
		probs = append(probs, Problem{File: names.pages, Msg: openMsg(err)})
	} else {
		probs = append(probs, auditPages(pf, names.pages)...)
		pf.Close()
	}
	return probs, true
}
