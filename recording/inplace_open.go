package recording

// This file opens a format 3 recording for replay in place (openInPlace): its entries,
// the member table checked against the parts, and its pages.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/klauspost/compress/gzip"
)

// recordingDataFiles lists the archive files of a format 3 recording among the directory
// entries present (names): data.warc.gz alone, or data-000.warc.gz, ... in order. It
// returns nil when there are none.
func recordingDataFiles(dir string, whole bool, parts []int) ([]string, error) {
	switch {
	case whole && len(parts) > 0:
		return nil, fmt.Errorf("recording %s: has both %s and %s", dir, RecordingDataFile, RecordingDataPart(parts[0]))
	case whole:
		return []string{filepath.Join(dir, RecordingDataFile)}, nil
	case len(parts) == 0:
		return nil, nil
	}
	slices.Sort(parts)
	files := make([]string, 0, len(parts))
	for i, n := range parts {
		if n != i {
			return nil, fmt.Errorf("recording %s: part %s is missing", dir, RecordingDataPart(i))
		}
		files = append(files, filepath.Join(dir, RecordingDataPart(n)))
	}
	return files, nil
}

// inPlaceFiles returns the files of the format 3 recording dir (RecordingFiles: the data
// file or its parts fourth) and the budget that bounds what its records may add up to
// (DefaultUnpackLimits). Errors name dir and what is missing.
func inPlaceFiles(dir string) ([]string, *unpackBudget, error) {
	files, err := RecordingFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(files) < 4 || !isDataFile(files[3]) {
		return nil, nil, fmt.Errorf("open recording %s: format %d needs %s (or its parts)", dir, RecordingFormat, RecordingDataFile)
	}
	limits, err := DefaultUnpackLimits()
	if err != nil {
		return nil, nil, fmt.Errorf("open recording %s: %w", dir, err)
	}
	budget, err := newUnpackBudget(dir, files, limits)
	if err != nil {
		return nil, nil, fmt.Errorf("open recording %s: %w", dir, err)
	}
	return files, budget, nil
}

// openInPlace opens the format 3 recording b.Dir (whose Manifest is read) for replay in
// place: pages.jsonl, entries.jsonl.gz (inflated within MaxEntriesBytes) and the archive's
// parts, checking every entry's member against the part sizes and the recording against
// DefaultUnpackLimits (the records may add up to at most that many bytes). On error
// nothing stays open.
func openInPlace(root *os.Root, b *Bundle) (*Bundle, error) {
	dir := b.Dir
	files, budget, err := inPlaceFiles(dir)
	if err != nil {
		return nil, err
	}
	z := &zarchive{}
	ok := false
	defer func() {
		if !ok {
			z.Close()
		}
	}()
	var sizes []int64
	for _, path := range files[3:] {
		f, err := openBundleFile(root, dir, filepath.Base(path))
		if err != nil {
			return nil, err
		}
		z.parts = append(z.parts, f)
		z.names = append(z.names, path)
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		sizes = append(sizes, fi.Size())
	}

	entriesPath := filepath.Join(dir, RecordingEntriesFile)
	if err := readInPlaceEntries(root, b, entriesPath, budget); err != nil {
		return nil, err
	}
	if err := addMembers(z, b, sizes, entriesPath); err != nil {
		return nil, err
	}
	if n := len(z.mems); n > 0 {
		z.size = z.mems[n-1].off + z.mems[n-1].n
	}
	if err := budget.add(z.size); err != nil {
		return nil, err
	}

	pf, err := openBundleFile(root, dir, RecordingPagesFile)
	if err != nil {
		return nil, err
	}
	b.Pages, err = readPages(io.LimitReader(pf, MaxPagesBytes), filepath.Join(dir, RecordingPagesFile))
	pf.Close()
	if err != nil {
		return nil, err
	}
	b.warc, b.warcSize, b.z, b.closer = z, z.size, z, z
	ok = true
	return b, nil
}

// entriesHint estimates the number of lines of the gzip file f from the inflated size its
// trailer states (ISIZE, the size modulo 4 GiB; a guess only, never trusted, and capped at
// 64 times the file's size, so four hostile bytes cannot make it allocate): about 400
// bytes a line, a little less than pab's entries take (424 to 641 bytes on average in the
// shipped tasks and the bench recordings), so the entries are allocated once.
func entriesHint(f *os.File) int {
	fi, err := f.Stat()
	if err != nil || fi.Size() < minMemberBytes {
		return 0
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], fi.Size()-4); err != nil {
		return 0
	}
	isize := int64(uint32(tail[0]) | uint32(tail[1])<<8 | uint32(tail[2])<<16 | uint32(tail[3])<<24)
	// the trailer is the file's word, not a fact: never more than JSONL compresses to
	// (64 times the file, far above the 10 to 20 times entries reach)
	return int(min(isize, fi.Size()*64) / 400)
}

func isDataFile(path string) bool {
	base := filepath.Base(path)
	return base == RecordingDataFile || dataPartName.MatchString(base)
}

// addMember checks the member fields of e's response (or request) record against the parts'
// sizes and adds the member to z.
func addMember(z *zarchive, e *Entry, i int, req bool, sizes []int64, path string) error {
	what, off, n, part, zoff, zn := "resp", e.RespOffset, e.RespLength, e.RespPart, e.RespGzOffset, e.RespGzLength
	if req {
		what, off, n, part, zoff, zn = "req", e.ReqOffset, e.ReqLength, e.ReqPart, e.ReqGzOffset, e.ReqGzLength
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("read %s: entry %s: %s", path, e.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case n <= 0:
		return fail("%sGzLength %d for a %sLength of %d", what, zn, what, n)
	case part < 0 || part >= len(sizes):
		return fail("%sPart %d: the recording has %d part(s)", what, part, len(sizes))
	case zn < minMemberBytes || zoff < 0 || zn > sizes[part] || zoff > sizes[part]-zn:
		return fail("%sGzOffset %d, %sGzLength %d: not a gzip member span of %s (%d bytes)", what, zoff, what, zn, filepath.Base(partPath(z, part)), sizes[part])
	case n/maxMemberRatio > zn:
		return fail("%sLength %d from a gzip member of %d bytes: more than deflate can expand; refused as a decompression bomb", what, n, zn)
	}
	z.mems = append(z.mems, zmember{off: off, n: n, zoff: zoff, zn: zn, part: int32(part), entry: int32(i), isRequest: req})
	return nil
}

func partPath(z *zarchive, part int) string { return z.names[part] }

// memberWhat names the record kind of a member in errors: "resp" or "req", as the entry
// fields are prefixed.
func memberWhat(isRequest bool) string {
	if isRequest {
		return "req"
	}
	return "resp"
}

// InPlaceArchive reports whether path, the last file RecordingFiles lists, is the archive of
// a format 3 recording (data.warc.gz or a part data-NNN.warc.gz), which OpenBundle reads in
// place, rather than format 2's warc.tar.gz (or a part), which must be unpacked first.
func InPlaceArchive(path string) bool { return isDataFile(path) }

// readInPlaceEntries reads entries.jsonl.gz of the format 3 recording b.Dir (at
// entriesPath) into b.Entries and b.byID, inflated within MaxEntriesBytes and budget.
func readInPlaceEntries(root *os.Root, b *Bundle, entriesPath string, budget *unpackBudget) error {
	return inflateEntries(root, b.Dir, entriesPath, budget, func(r io.Reader, hint int) error {
		var err error
		b.Entries, b.byID, err = readEntriesIndexed(r, entriesPath, MaxWARCBytes, hint)
		return err
	})
}

// inflateEntries opens entries.jsonl.gz of the format 3 recording dir (at entriesPath,
// inside root) and calls read with its lines, inflated on a second goroutine within
// MaxEntriesBytes and budget, and entriesHint's guess of their number.
func inflateEntries(root *os.Root, dir, entriesPath string, budget *unpackBudget, read func(r io.Reader, hint int) error) error {
	ef, err := openBundleFile(root, dir, RecordingEntriesFile)
	if err != nil {
		return err
	}
	defer ef.Close()
	cr := newCountReader(ef)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return fmt.Errorf("read %s at offset %d: %w", entriesPath, cr.offset(), err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxEntriesBytes + 1}
	// inflate on a second goroutine while this one parses the lines: a start spends most of
	// its time here (docs/performance.md, "Start time")
	pr, pw := io.Pipe()
	inflated := make(chan struct{})
	go func() {
		defer close(inflated)
		_, err := io.CopyBuffer(pw, lr, make([]byte, 128<<10))
		pw.CloseWithError(err) // nil: EOF for the reader
	}()
	err = read(pr, entriesHint(ef))
	pr.CloseWithError(errors.New("entries read")) // stops the inflater if the parse ended early
	<-inflated
	if err != nil {
		return err
	}
	if lr.N <= 0 {
		return fmt.Errorf("%s expands to more than %d bytes", entriesPath, int64(MaxEntriesBytes))
	}
	return budget.add(MaxEntriesBytes + 1 - lr.N)
}

// addMembers fills z.mems with the members of every entry of b (checked against the
// parts' sizes), sorted by logical offset, and checks that no two overlap and that they
// lie in the parts in the order of their records.
func addMembers(z *zarchive, b *Bundle, sizes []int64, entriesPath string) error {
	z.mems = make([]zmember, 0, 2*len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		if err := addMember(z, e, i, false, sizes, entriesPath); err != nil {
			return err
		}
		if e.ReqLength > 0 || e.ReqGzLength != 0 {
			if err := addMember(z, e, i, true, sizes, entriesPath); err != nil {
				return err
			}
		}
	}
	return sortMembers(z, func(i int32) string { return b.Entries[i].ID }, entriesPath)
}

// sortMembers sorts z.mems by logical offset and checks that no two overlap and that they
// lie in the parts in the order of their records; id names entry i in errors.
func sortMembers(z *zarchive, id func(i int32) string, entriesPath string) error {
	slices.SortFunc(z.mems, func(a, b zmember) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	for k := 1; k < len(z.mems); k++ {
		prev, m := &z.mems[k-1], &z.mems[k]
		if m.off < prev.off+prev.n {
			return fmt.Errorf("read %s: entry %s: record at offset %d overlaps the record of entry %s at offset %d", entriesPath, id(m.entry), m.off, id(prev.entry), prev.off)
		}
		// the members lie in the parts in the order of their records, none inside another
		// (so no two entries share a member, and a part's bytes are read for one record)
		if m.part < prev.part || (m.part == prev.part && m.zoff < prev.zoff+prev.zn) {
			return fmt.Errorf("read %s: entry %s: %s gzip member at part %d offset %d is not after the member of entry %s (part %d, offset %d, %d bytes), though its record follows that one", entriesPath, id(m.entry), memberWhat(m.isRequest), m.part, m.zoff, id(prev.entry), prev.part, prev.zoff, prev.zn)
		}
	}
	return nil
}
