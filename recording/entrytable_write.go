package recording

// entrytable_write.go: the entry table written straight from a recording's entries file,
// one line at a time, for a recording too large to open with its entries in memory
// (replay's saved index is built this way at the first start of a large recording:
// docs/replay.md, "The first start").

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// EntryTableMemory is about how many bytes of memory WriteEntryTable keeps for each entry
// while it writes: its blob offset (8), its id list item (16), its gzip members (48 each,
// two for an entry with a request record) and the key its id is checked unique by (about 40
// in a map).
const EntryTableMemory = 160

// WriteEntryTable writes to w the entry table of the bundle directory or format 3 recording
// dir: the bytes EncodeEntryTable gives for the bundle OpenBundle(dir) opens, after the
// same checks of every entry, gzip member and page (errors name the file and the entry as
// OpenBundle's do, in the same words). It reads the entries and pages files one line at a
// time and keeps about EntryTableMemory bytes an entry, not the entries: the blob goes to
// a temporary file in tmpDir first, named by tmpPattern (os.CreateTemp's pattern; removed
// before it returns). It returns the number of entries.
func WriteEntryTable(dir, tmpDir, tmpPattern string, w io.Writer) (n int, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	mf, err := openBundleFile(root, dir, ManifestFile)
	if err != nil {
		return 0, err
	}
	m, err := readManifest(mf, filepath.Join(dir, ManifestFile))
	mf.Close()
	if err != nil {
		return 0, err
	}

	tmp, err := os.CreateTemp(tmpDir, tmpPattern)
	if err != nil {
		return 0, fmt.Errorf("entry table: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	var (
		offs    []uint64
		ids     []idRef
		blobLen int64
		rec     []byte
		z       *zarchive // a format 3 recording's parts (names) and members
		sizes   []int64   // the parts' sizes
		size    int64     // the bytes of records
	)
	// the errors of members and of the table's encoding are found as each line is read but
	// reported as OpenBundle reports them: after every line is read and checked
	var memberErr, encodeErr error
	add := func(e *Entry, path string) error {
		i := len(ids)
		if i >= maxTableEntries {
			return fmt.Errorf("entry table: more than %d entries", maxTableEntries)
		}
		if z != nil && memberErr == nil {
			memberErr = addMember(z, e, i, false, sizes, path)
			if memberErr == nil && (e.ReqLength > 0 || e.ReqGzLength != 0) {
				memberErr = addMember(z, e, i, true, sizes, path)
			}
		}
		var err error
		if rec, err = appendEntry(rec[:0], e); err != nil {
			if encodeErr == nil {
				encodeErr = fmt.Errorf("entry table: entry %s: %w", e.ID, err)
			}
			// the table is not written; the record keeps the id for the errors that
			// name entries (sortMembers)
			rec, _ = appendEntry(rec[:0], &Entry{ID: e.ID, Method: "GET", URL: "-", Status: 200})
		}
		if _, err := bw.Write(rec); err != nil {
			return fmt.Errorf("entry table: %w", err)
		}
		offs = append(offs, uint64(blobLen))
		blobLen += int64(len(rec))
		ids = append(ids, idRef{TableHash(e.ID), uint32(i)})
		return nil
	}

	// the pages are checked on a second goroutine while the entries are read (about a
	// third of the time at 10^6 entries); their error is reported where OpenBundle's is
	checkPagesAsync := func(name string, limit int64) func() error {
		done := make(chan error, 1)
		go func() { done <- checkPages(root, dir, name, limit) }()
		return sync.OnceValue(func() error { return <-done })
	}
	if _, serr := root.Stat(WARCFile); m.Format != 0 && errors.Is(serr, fs.ErrNotExist) {
		if m.Format != RecordingFormat {
			return 0, formatError(dir, m.Format)
		}
		pages := checkPagesAsync(RecordingPagesFile, MaxPagesBytes)
		defer pages() // the check ends before root is closed
		files, budget, err := inPlaceFiles(dir)
		if err != nil {
			return 0, err
		}
		z = &zarchive{}
		for _, path := range files[3:] {
			f, err := openBundleFile(root, dir, filepath.Base(path))
			if err != nil {
				return 0, err
			}
			fi, err := f.Stat()
			f.Close()
			if err != nil {
				return 0, fmt.Errorf("stat %s: %w", path, err)
			}
			z.names = append(z.names, path)
			sizes = append(sizes, fi.Size())
		}
		entriesPath := filepath.Join(dir, RecordingEntriesFile)
		err = inflateEntries(root, dir, entriesPath, budget, func(r io.Reader, hint int) error {
			// allocated once for the entries the file's size suggests (at most 2^20: past
			// that they grow by doubling)
			hint = min(max(hint, 0), maxEntriesHint)
			offs, ids, z.mems = make([]uint64, 0, hint+1), make([]idRef, 0, hint), make([]zmember, 0, 2*hint)
			return eachEntry(r, entriesPath, MaxWARCBytes, func(_ int, e *Entry) error { return add(e, entriesPath) })
		})
		if err == nil {
			err = memberErr
		}
		if err != nil {
			return 0, err
		}
		if err := bw.Flush(); err != nil {
			return 0, fmt.Errorf("entry table: %w", err)
		}
		// the ids of the entries an error names are read back from the blob
		id := func(i int32) string {
			buf := make([]byte, offsEnd(offs, blobLen, int(i))-int64(offs[i]))
			if _, err := tmp.ReadAt(buf, int64(offs[i])); err == nil {
				if e, err := decodeEntryRecord(int(i), buf); err == nil {
					return e.ID
				}
			}
			return fmt.Sprintf("number %d", i)
		}
		if err := sortMembers(z, id, entriesPath); err != nil {
			return 0, err
		}
		if k := len(z.mems); k > 0 {
			size = z.mems[k-1].off + z.mems[k-1].n
		}
		if err := budget.add(size); err != nil {
			return 0, err
		}
		if err := pages(); err != nil {
			return 0, err
		}
	} else {
		pages := checkPagesAsync(PagesFile, -1)
		defer pages() // the check ends before root is closed
		wf, err := openBundleFile(root, dir, WARCFile)
		if err != nil {
			return 0, err
		}
		fi, err := wf.Stat()
		wf.Close()
		if err != nil {
			return 0, fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
		}
		size = fi.Size()
		ef, err := openBundleFile(root, dir, EntriesFile)
		if err != nil {
			return 0, err
		}
		entriesPath := filepath.Join(dir, EntriesFile)
		err = eachEntry(ef, entriesPath, size, func(_ int, e *Entry) error { return add(e, entriesPath) })
		ef.Close()
		if err == nil {
			err = pages()
		}
		if err != nil {
			return 0, err
		}
		if err := bw.Flush(); err != nil {
			return 0, fmt.Errorf("entry table: %w", err)
		}
	}
	if encodeErr != nil {
		return 0, encodeErr
	}
	offs = append(offs, uint64(blobLen))
	var mems []zmember
	if z != nil {
		mems = z.mems
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("entry table: %w", err)
	}
	n = len(ids)
	if err := writeEntryTable(w, offs, ids, mems, blobLen, size, tmp); err != nil {
		return 0, err
	}
	return n, nil
}

// offsEnd is where entry i's blob record ends: the next entry's offset, or blobLen for the
// last one (offs holds the offsets of the entries written so far).
func offsEnd(offs []uint64, blobLen int64, i int) int64 {
	if i+1 < len(offs) {
		return int64(offs[i+1])
	}
	return blobLen
}

// checkPages reads the pages file name of the bundle dir (inside root) as OpenBundle does,
// within limit bytes (-1: none), without keeping the pages.
func checkPages(root *os.Root, dir, name string, limit int64) error {
	pf, err := openBundleFile(root, dir, name)
	if err != nil {
		return err
	}
	defer pf.Close()
	var r io.Reader = pf
	if limit >= 0 {
		r = io.LimitReader(pf, limit)
	}
	return eachPage(r, filepath.Join(dir, name), func(*Page) error { return nil })
}
