package recording

// export.go: writes a bundle's recording as one standard WARC 1.1 file for other tools
// (pywb, ReplayWeb.page, warcio): a warcinfo record, then every exchange's records exactly
// as stored in archive/data.warc, optionally one gzip member per record.

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/warc"
)

// WARC11Spec is the address of the WARC 1.1 standard, written as conformsTo in the
// warcinfo record of an exported WARC (WARC 1.1 section 6.2).
const WARC11Spec = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

// exportedRecord is where one response or revisit record of entry e sits in an exported
// WARC file: offset and length in bytes of the file as written (of the gzip member when
// the file is compressed per record).
type exportedRecord struct {
	e           *Entry
	off, length int64
	revisit     bool
}

// ExportWARC writes the recording of b to w as a WARC 1.1 file (ISO 28500:2017): first a
// warcinfo record (section 6.2) naming pab and the task, then for each entry, in
// entries.jsonl order, its response or revisit record and its request record, byte for
// byte as stored in archive/data.warc. Revisit records carry WARC-Refers-To,
// WARC-Refers-To-Target-URI, WARC-Refers-To-Date and WARC-Payload-Digest as the bundle
// writer stores them (an unresolved revisit carries what its input said). With
// gzipPerRecord every record is its own gzip member (WARC 1.1 annex D.2), the layout
// other tools expect of a .warc.gz file. Output is deterministic: the warcinfo record's
// date is the manifest's captured_from and its id is derived from the content. A record
// that does not match entries.jsonl is an error naming data.warc and the offset.
func ExportWARC(b *Bundle, w io.Writer, gzipPerRecord bool) error {
	_, err := exportWARC(b, w, gzipPerRecord, "")
	return err
}

// ExportWARCFile writes the recording of b to path with ExportWARC, compressed per record
// when path ends in ".gz" (".warc.gz"). The file is written to a temporary file in the
// same directory, synced and renamed over path, so path is either the old file or the
// whole new one.
func ExportWARCFile(b *Bundle, path string) error {
	gz := strings.HasSuffix(strings.ToLower(path), ".gz")
	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		_, err := exportWARC(b, w, gz, filepath.Base(path))
		return err
	})
}

// exportWARC is ExportWARC that also returns where each response and revisit record was
// written, for a CDXJ index; filename goes to the warcinfo record's WARC-Filename.
func exportWARC(b *Bundle, w io.Writer, gz bool, filename string) ([]exportedRecord, error) {
	cw := &countWriter{w: w}
	var zw *gzip.Writer
	put := func(src io.Reader) (int64, int64, error) {
		start := cw.n
		var err error
		if gz {
			if zw == nil {
				zw, err = gzip.NewWriterLevel(cw, gzip.DefaultCompression)
			} else {
				zw.Reset(cw)
			}
			if err == nil {
				_, err = io.Copy(zw, src)
			}
			if err == nil {
				err = zw.Close()
			}
		} else {
			_, err = io.Copy(cw, src)
		}
		return start, cw.n - start, err
	}
	if _, _, err := put(bytes.NewReader(warcinfoRecord(b, filename))); err != nil {
		return nil, fmt.Errorf("export: write warcinfo: %w", err)
	}
	path := filepath.Join(b.Dir, WARCFile)
	out := make([]exportedRecord, 0, len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		rec, err := b.record(e.RespOffset, e.RespLength)
		if err == nil && rec.typ != "response" && rec.typ != "revisit" {
			err = fmt.Errorf("WARC-Type is %q, want response or revisit", rec.typ)
		}
		if err != nil {
			return nil, fmt.Errorf("export: read %s at offset %d (entry %s): %w", path, e.RespOffset, e.ID, err)
		}
		off, n, err := put(io.NewSectionReader(b.warc, e.RespOffset, e.RespLength))
		if err != nil {
			return nil, fmt.Errorf("export: entry %s: %w", e.ID, err)
		}
		out = append(out, exportedRecord{e: e, off: off, length: n, revisit: rec.typ == "revisit"})
		if e.ReqLength == 0 {
			continue
		}
		rec, err = b.record(e.ReqOffset, e.ReqLength)
		if err == nil && rec.typ != "request" {
			err = fmt.Errorf("WARC-Type is %q, want request", rec.typ)
		}
		if err != nil {
			return nil, fmt.Errorf("export: read %s at offset %d (entry %s): %w", path, e.ReqOffset, e.ID, err)
		}
		if _, _, err := put(io.NewSectionReader(b.warc, e.ReqOffset, e.ReqLength)); err != nil {
			return nil, fmt.Errorf("export: entry %s: %w", e.ID, err)
		}
	}
	return out, nil
}

// warcinfoRecord builds the warcinfo record of an exported file (WARC 1.1 section 6.2):
// an application/warc-fields block with software, format, conformsTo and isPartOf (the
// task id). Its WARC-Date is the recording's start, so the bytes depend only on the bundle.
func warcinfoRecord(b *Bundle, filename string) []byte {
	var block bytes.Buffer
	block.WriteString("software: pab\r\n")
	block.WriteString("format: WARC File Format 1.1\r\n")
	block.WriteString("conformsTo: " + WARC11Spec + "\r\n")
	if id := oneLine(b.Manifest.TaskID); id != "" {
		block.WriteString("isPartOf: " + id + "\r\n")
	}
	date := exportDate(b).Format(TimeFormat)
	h := sha256.New()
	for _, e := range b.Entries {
		h.Write([]byte(e.ID + " " + e.URL + " " + e.Digest + "\n"))
	}
	var rec bytes.Buffer
	rec.WriteString("WARC/1.1\r\n")
	rec.WriteString("WARC-Type: warcinfo\r\n")
	rec.WriteString("WARC-Record-ID: " + warc.RecordID("", "warcinfo", filename, date, append(block.Bytes(), h.Sum(nil)...)) + "\r\n")
	rec.WriteString("WARC-Date: " + date + "\r\n")
	if name := oneLine(filename); name != "" {
		rec.WriteString("WARC-Filename: " + name + "\r\n")
	}
	rec.WriteString("Content-Type: application/warc-fields\r\n")
	rec.WriteString("WARC-Block-Digest: sha256:" + sha256Hex(block.Bytes()) + "\r\n")
	rec.WriteString("Content-Length: " + strconv.Itoa(block.Len()) + "\r\n\r\n")
	rec.Write(block.Bytes())
	rec.WriteString("\r\n\r\n")
	return rec.Bytes()
}

// exportDate is the time an export is stamped with: the manifest's captured_from, else
// the first entry's ts, else 1980-01-01 (the earliest time a ZIP file can hold).
func exportDate(b *Bundle) time.Time {
	for _, s := range []string{b.Manifest.CapturedFrom, firstTS(b)} {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t.UTC()
		}
	}
	return time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
}

func firstTS(b *Bundle) string {
	if len(b.Entries) == 0 {
		return ""
	}
	return b.Entries[0].TS
}

// oneLine drops control characters (line breaks included) so s fits in one header line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
