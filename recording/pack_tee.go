package recording

// pack_tee.go: a bundle packed into format 3 as the bundle writer writes it (the import's
// ImportOptions.PackDir), so that the members are compressed on the other cores while the
// next exchanges are written, and data.warc is not read again to be packed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// packTee is the pack of a BundleWriter's records as they are written: each record's
// bytes, encoded once into buf, go to data.warc and to the pack's pipe (packPipe); each
// entry is queued once its two records are.
type packTee struct {
	p         *packPipe
	dir       string
	buf       bytes.Buffer // the record being written
	resp, req *packMember  // the members of the exchange being written
	done      bool
}

// packInto makes w pack its records into dir (an empty directory) as it writes them, in
// parts of partSize bytes: once w is closed, dir holds the data parts and entries.jsonl.gz
// that PackStaged would write for the bundle (the same bytes, TestPackTeeSameBytes), and
// FinishTeePack adds the manifest and pages. ctx done stops the pack; w's Close then fails.
func (w *BundleWriter) packInto(ctx context.Context, dir string, partSize int64) {
	w.tee = &packTee{p: startPackPipe(ctx, dir, partSize), dir: dir}
}

// teeRecord writes a record (warc.EncodeRecord's arguments) to data.warc and to the pack
// as the exchange's response (first) or request member, and returns its length.
func (w *BundleWriter) teeRecord(first bool, encode func(b *bytes.Buffer) error) (int64, error) {
	t := w.tee
	t.buf.Reset()
	if err := encode(&t.buf); err != nil {
		return 0, err
	}
	n := int64(t.buf.Len())
	if _, err := w.bw.Write(t.buf.Bytes()); err != nil {
		return 0, err
	}
	w.off += n
	m, err := t.p.member(n, first, func(raw []byte) error {
		copy(raw, t.buf.Bytes())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pack: %w", err)
	}
	if first {
		t.resp, t.req = m, nil
	} else {
		t.req = m
	}
	return n, nil
}

// teeEntry queues the entry of the exchange whose records were just written.
func (t *packTee) teeEntry(e Entry) {
	it := &packItem{e: &e, resp: t.resp, req: t.req, members: []*packMember{t.resp}}
	if t.req != nil {
		it.members = append(it.members, t.req)
	}
	t.resp, t.req = nil, nil
	t.p.queue(it)
}

// finish ends the pack (packPipe.finish); err, not nil, stops it. An error leaves dir to be
// removed by the caller.
func (t *packTee) finish(err error) error {
	if t.done {
		return err
	}
	t.done = true
	return t.p.finish(err)
}

// errBundleAborted stops the pack of an aborted bundle writer.
var errBundleAborted = errors.New("bundle writer aborted")

// FinishTeePack completes the directory staged, packed by ImportWARCs as it wrote the bundle
// in bundleDir (ImportOptions.PackDir): it writes manifest.json (the bundle's, with "format":
// RecordingFormat) and pages.jsonl (the bundle's, checked as OpenBundle reads it) and syncs
// the directory, as PackStaged would have. On an error staged is left for the caller to
// remove.
func FinishTeePack(bundleDir, staged string) error {
	if err := EachBundlePage(bundleDir, func(*Page) error { return nil }); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	m, err := ReadBundleManifest(bundleDir)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	m.Format = RecordingFormat
	if err := writeJSONFile(filepath.Join(staged, RecordingManifestFile), m); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	root, err := os.OpenRoot(bundleDir)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	defer root.Close()
	if err := copyBundleFile(root, bundleDir, PagesFile, filepath.Join(staged, RecordingPagesFile), false); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	if err := atomicfile.SyncDir(staged); err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	return nil
}

// NewStagingDir makes an empty temporary directory (mode 0755) beside recordingDir, where a
// new recording is staged before Publish moves it into place: ImportOptions.PackDir.
func NewStagingDir(recordingDir string) (string, error) {
	return stagingDir(recordingDir)
}
