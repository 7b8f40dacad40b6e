package record

// journal.go: the recording's own WARC file, written as exchanges complete. Each exchange
// (a response record followed by its request record) is encoded whole into memory and
// appended with one write(2), and the file is fsynced at most a second later, so a killed
// recorder leaves whole exchanges and at most one partial one at the end, which the next
// open cuts off (see Recover).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/warc"
)

// WARC header fields the journal adds to response records besides the bundle's own
// RR-Resource-Type and RR-Original-Content-Encoding.
const (
	// HeaderPage is the method ("GET" or "POST") of a top-level navigation; its presence
	// makes the exchange a pages.jsonl line.
	HeaderPage = "RR-Page"
	// HeaderPageNote is the page's note ("not-found-probe").
	HeaderPageNote = "RR-Page-Note"
)

// NoteNotFoundProbe is the page note of a site's not-found probe.
const NoteNotFoundProbe = "not-found-probe"

// syncEvery bounds how long an appended exchange may wait for fsync.
const syncEvery = time.Second

// exchange is one recorded exchange as it goes to the journal: bodies are final (decoded,
// redacted), headers are storedRequestHeader's and storedResponseHeader's.
type exchange struct {
	recording.Exchange
	Page     string // "GET"/"POST" for a page, else ""
	PageNote string
}

// journal is an open journal file, locked against a second recorder.
type journal struct {
	mu   sync.Mutex
	path string
	f    *os.File
	// write and fsync are f.Write and f.Sync; tests replace them to inject errors.
	write    func([]byte) (int, error)
	fsync    func() error
	size     int64 // bytes of whole exchanges: the file ends there
	lastSync time.Time
	dirty    bool
	err      error // the first write or sync error; sticky
	broken   error // set when a partial exchange could not be cut off after a write error
	count    int   // exchanges in the file
	// onFail, when set, is called once with err, when it is first met (without j.mu held).
	onFail func(error)
}

// openJournal opens (creating) the journal at path, takes an exclusive lock on it, cuts a
// partial last exchange (see Recover) and positions at the end.
func openJournal(path string) (*journal, RecoverReport, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, RecoverReport{}, fmt.Errorf("open journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, RecoverReport{}, fmt.Errorf("open journal %s: another pab record is using it (%v)", path, err)
	}
	rep, err := recoverFile(f, path)
	if err != nil {
		f.Close()
		return nil, rep, err
	}
	if _, err := f.Seek(rep.Size, io.SeekStart); err != nil {
		f.Close()
		return nil, rep, fmt.Errorf("open journal %s: %w", path, err)
	}
	return &journal{path: path, f: f, write: f.Write, fsync: f.Sync, size: rep.Size, lastSync: time.Now(), count: rep.Exchanges}, rep, nil
}

// append writes one encoded exchange with a single write and fsyncs when the last
// fsync is older than syncEvery. A write or sync error is sticky: every later append
// returns it. After a failed write the file is cut back to its last whole exchange, so
// the journal stays readable. A sync error met after the exchange was written does not
// fail that exchange (it is in the file), only the later ones.
func (j *journal) append(b []byte) error {
	j.mu.Lock()
	err, failed := j.appendLocked(b)
	j.mu.Unlock()
	if failed != nil && j.onFail != nil {
		j.onFail(failed)
	}
	return err
}

// appendLocked returns the exchange's error, and the journal's error when this call met it
// first.
func (j *journal) appendLocked(b []byte) (err, failed error) {
	if j.err != nil {
		return j.err, nil
	}
	if j.f == nil {
		return errors.New("journal is closed"), nil
	}
	if _, werr := j.write(b); werr != nil {
		j.err = fmt.Errorf("write journal %s: %w", j.path, bareErr(werr))
		// a failed write may have left part of the exchange: cut it off (nothing is
		// written after it, so the file offset does not matter any more)
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = fmt.Errorf("journal %s ends in a partial exchange after a write error (%v) that could not be cut at offset %d: %w; run pab record --finish to cut it", j.path, werr, j.size, terr)
		}
		return j.err, j.err
	}
	j.size += int64(len(b))
	j.count++
	j.dirty = true
	if time.Since(j.lastSync) >= syncEvery && j.syncLocked() {
		return nil, j.err
	}
	return nil, nil
}

// syncLocked fsyncs pending writes; it reports whether this call met the first error.
func (j *journal) syncLocked() (first bool) {
	if !j.dirty || j.f == nil {
		return false
	}
	err := j.fsync()
	j.dirty = false
	j.lastSync = time.Now()
	if err != nil && j.err == nil {
		j.err = fmt.Errorf("sync journal %s: %w", j.path, bareErr(err))
		return true
	}
	return false
}

// sync fsyncs pending writes (called by the recorder's ticker).
func (j *journal) sync() {
	j.mu.Lock()
	first := j.syncLocked()
	err := j.err
	j.mu.Unlock()
	if first && j.onFail != nil {
		j.onFail(err)
	}
}

// stored is the number of whole exchanges in the file.
func (j *journal) stored() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.count
}

// close fsyncs, unlocks and closes the file. It returns an error when the file may not
// end after its last whole exchange, or cannot be synced or closed now; a write error met
// earlier (reported by append and onFail) is not returned again when the file was cut
// back to its whole exchanges.
func (j *journal) close() error {
	j.mu.Lock()
	if j.f == nil {
		j.mu.Unlock()
		return j.broken
	}
	var err error
	if serr := j.fsync(); serr != nil {
		err = fmt.Errorf("sync journal %s: %w", j.path, bareErr(serr))
	}
	if cerr := j.f.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close journal %s: %w", j.path, bareErr(cerr))
	}
	j.f = nil
	first := err != nil && j.err == nil
	if first {
		j.err = err
	}
	if j.broken != nil {
		err = j.broken
	}
	j.mu.Unlock()
	if first && j.onFail != nil {
		j.onFail(err)
	}
	return err
}

// bareErr is err without the *os.PathError wrapping that repeats the operation and the
// path ("write /x/journal.warc: no space left on device" becomes "no space left on
// device"), for messages that name the journal themselves.
func bareErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// RecoverReport says what opening a journal found.
type RecoverReport struct {
	// Exchanges is the number of whole exchanges kept.
	Exchanges int `json:"exchanges"`
	// Size is the journal size in bytes after recovery.
	Size int64 `json:"size"`
	// Cut is the number of bytes removed from the end (a partial exchange); Reason says why.
	Cut    int64  `json:"cut,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Recover cuts a partial last exchange off the journal at path (what a killed recorder
// leaves) so that it ends after its last whole exchange, and reports what it kept. It
// refuses a journal locked by a running recorder.
func Recover(path string) (RecoverReport, error) {
	j, rep, err := openJournal(path)
	if err != nil {
		return rep, err
	}
	return rep, j.close()
}

// recoverFile scans f, truncating it after the last whole exchange (a response record
// directly followed by its request record).
func recoverFile(f *os.File, path string) (RecoverReport, error) {
	var rep RecoverReport
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("open journal %s: %w", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return rep, nil
	}
	var good int64
	reason := ""
	err = scanJournal(path, func(x *journalExchange) error {
		good = x.end
		rep.Exchanges++
		return nil
	})
	if err != nil {
		reason = err.Error()
	}
	if good < size {
		if reason == "" {
			reason = "bytes after the last whole exchange"
		}
		if err := f.Truncate(good); err != nil {
			return rep, fmt.Errorf("recover journal %s: truncate at offset %d: %w", path, good, err)
		}
		if err := f.Sync(); err != nil {
			return rep, fmt.Errorf("recover journal %s: %w", path, err)
		}
		rep.Cut, rep.Reason = size-good, reason
	}
	rep.Size = good
	return rep, nil
}

// journalExchange is one exchange read back from a journal.
type journalExchange struct {
	resp, req *warc.Record
	end       int64 // file offset after the request record
}

// scanJournal reads the journal's exchanges in order and calls each for every whole one.
// It returns nil at a clean end, and an error naming the offset at the first record that
// is partial, unreadable or out of place (what follows is not read).
func scanJournal(path string, each func(x *journalExchange) error) error {
	r, err := warc.OpenReader(path)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// No whole block is larger than the file: a damaged Content-Length cannot make the
	// reader allocate more than that.
	r.MaxBlockSize = max(fi.Size(), 1)
	var resp *warc.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			if resp != nil {
				return fmt.Errorf("read %s at offset %d: response record without its request", path, resp.Offset)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Offset < 0 || rec.Block == nil || rec.HTTP == nil {
			return fmt.Errorf("read %s at offset %d: not a journal record", path, rec.Pos)
		}
		if err := checkWhole(f, rec); err != nil {
			return fmt.Errorf("read %s at offset %d: %w", path, rec.Offset, err)
		}
		switch {
		case rec.Type == "response" && resp == nil:
			resp = rec
		case rec.Type == "request" && resp != nil && rec.Get("WARC-Concurrent-To") == resp.ID:
			if err := each(&journalExchange{resp: resp, req: rec, end: rec.Offset + rec.Length}); err != nil {
				return err
			}
			resp = nil
		default:
			return fmt.Errorf("read %s at offset %d: unexpected %s record", path, rec.Offset, rec.Type)
		}
	}
}

// checkWhole checks that rec, as the lenient reader accepted it, is whole in f: its
// header ends with a blank line, then BlockSize bytes, then the end marker CRLF CRLF, and
// Length covers exactly that (the reader accepts a missing or short end marker).
func checkWhole(f *os.File, rec *warc.Record) error {
	head := make([]byte, warc.MaxWARCHeaderBytes) // no record pab writes has a longer header (ErrHeaderTooLarge)
	n, err := f.ReadAt(head, rec.Offset)
	if err != nil && err != io.EOF {
		return err
	}
	i := bytes.Index(head[:n], []byte("\r\n\r\n"))
	if i < 0 {
		return errors.New("record header does not end")
	}
	end := int64(i) + 4 + rec.BlockSize + 4
	if end != rec.Length {
		return errors.New("record cut short")
	}
	var marker [4]byte
	if _, err := f.ReadAt(marker[:], rec.Offset+end-4); err != nil || string(marker[:]) != "\r\n\r\n" {
		return errors.New("record end marker missing")
	}
	return nil
}

// encode returns the exchange as two whole WARC 1.1 records (response, then request),
// encoded by recording.EncodeExchange, the bundle writer's own encoding, with the page fields
// added to the response record. Each call takes a fresh random exchange id, so no two
// journal records share a record id. It returns recording.EncodeExchange's warnings and errors.
func (x *exchange) encode() ([]byte, []string, error) {
	var extra []warc.Field
	if x.Page != "" {
		extra = append(extra, warc.Field{Name: HeaderPage, Value: x.Page})
	}
	if x.PageNote != "" {
		extra = append(extra, warc.Field{Name: HeaderPageNote, Value: x.PageNote})
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return recording.EncodeExchange(x.Exchange, "j"+hex.EncodeToString(id[:]), extra)
}
