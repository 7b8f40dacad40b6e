// Package atomicfile writes whole files so that a reader sees the old file or the new one,
// never half of one: the data goes to a temporary file in the same directory, is synced,
// given its mode and renamed over the path, and the directory is synced so the rename
// survives a crash.
package atomicfile

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm through a temporary file in path's directory
// (which must exist), fsync and rename. On any error the temporary file is removed, path is
// left as it was, and the error names path.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom is Write for data produced by fill, which writes it to w (buffered, 256 KiB).
// An error of fill is returned, wrapped with path, and nothing is written.
func WriteFrom(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	p, err := Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, errors.Unwrap(err))
	}
	bw := bufio.NewWriterSize(p, 256<<10)
	if err = fill(bw); err == nil {
		err = bw.Flush()
	}
	if err != nil {
		p.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.Commit(perm)
}

// WriteJSON writes v to path as Write does, encoded as JSON indented by two spaces, with
// <, > and & as they are (not \u003c) and a final newline: the form of every JSON file pab
// writes for people to read (result.json, run.json, summary.json, ...).
func WriteJSON(path string, v any, perm os.FileMode) error {
	data, err := MarshalJSON(v)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return Write(path, data, perm)
}

// MarshalJSON is the encoding of WriteJSON: v as JSON indented by two spaces, HTML
// characters not escaped, a final newline.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteNew creates the file path, which must not exist yet (O_EXCL: an existing path is an
// *fs.PathError wrapping fs.ErrExist), with mode perm, lets fill write its data straight to
// it, then fsyncs and closes it. It is for files inside a directory that is itself made in
// a temporary place and renamed into place whole (a staged bundle or recording), where
// Write's per-file rename is not needed. An error of fill is returned as it is; a failed
// sync is "sync PATH: ..."; on any error the partial file is removed.
func WriteNew(path string, perm os.FileMode, fill func(w io.Writer) error) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// SyncDir fsyncs the directory dir, so that a rename or a new file in it is durable. It
// works on a regular file as well (its data and metadata).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// WriteNoReplace writes data to path as Write does, except that an existing path is kept
// as it is: the synced temporary file is linked into place (link(2) refuses an existing
// name) instead of renamed over it. When path exists, nothing changes and the error wraps
// fs.ErrExist; two writers racing for path leave exactly one of their files there.
func WriteNoReplace(path string, data []byte, perm os.FileMode) error {
	p, err := Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, errors.Unwrap(err))
	}
	if _, err := p.Write(data); err != nil {
		p.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return p.commit(perm, func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			return err
		}
		os.Remove(tmp) // path holds the file; the temporary name is not needed
		return nil
	})
}

// syncClose gives f mode perm, fsyncs it and closes it (always), returning the first error.
func syncClose(f *os.File, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteIn is Write for the file name inside root: the temporary file, the rename and the
// directory sync all go through root (os.Root), so neither name nor a symbolic link on the
// way may lead out of root. Errors name root's directory, a slash and name as given.
func WriteIn(root *os.Root, name string, data []byte, perm os.FileMode) (err error) {
	path := root.Name() + string(filepath.Separator) + name
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err == nil {
		err = syncClose(f, perm)
	} else {
		f.Close()
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, derr := root.Open(filepath.Dir(name)); derr == nil {
		_ = d.Sync() // as in commit: the file is in place
		d.Close()
	}
	return nil
}

// Pending is a file written over time that appears at its path whole or not at all: a
// temporary file in the path's directory (its *os.File is embedded, for Write and the
// rest), renamed over the path by Commit, removed by Abort. It is Write for data that
// arrives piece by piece (an agent's output, a replay log). The caller serializes its
// writes, Commit and Abort.
type Pending struct {
	*os.File
	path string
	done bool
}

// Create starts a Pending file for path, whose directory must exist. The error names path.
func Create(path string) (*Pending, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &Pending{File: f, path: path}, nil
}

// Path is the path the file is committed to.
func (p *Pending) Path() string { return p.path }

// Commit gives the file mode perm, fsyncs and closes it, renames it over its path and
// syncs the directory. On an error the temporary file is removed, the path is left as it
// was, and the error names the path. A second Commit, or one after Abort, is an error.
func (p *Pending) Commit(perm os.FileMode) error {
	return p.commit(perm, os.Rename)
}

// commit is Commit with place putting the synced temporary file at the path.
func (p *Pending) commit(perm os.FileMode, place func(tmp, path string) error) error {
	if p.done {
		return fmt.Errorf("write %s: already committed or aborted", p.path)
	}
	p.done = true
	tmp := p.File.Name()
	err := syncClose(p.File, perm)
	if err == nil {
		err = place(tmp, p.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", p.path, err)
	}
	// the file is in place; a directory that cannot be synced (some file systems refuse)
	// does not undo that
	_ = SyncDir(filepath.Dir(p.path))
	return nil
}

// Abort closes and removes the temporary file; the path is left as it was. It does nothing
// after Commit or a first Abort.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	p.File.Close()
	os.Remove(p.File.Name())
}
