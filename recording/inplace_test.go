package recording

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// packParts2 writes the bundle as a format 2 recording (warc.tar.gz), for the tests of the
// format 2 readers (Unpack, migration, audit).
func packParts2(bundleDir, recDir string, partSize int64) error {
	return PackFormat2(bundleDir, recDir, partSize)
}

// realRecordings are the shipped tasks' recordings (tasks/*/recording).
func realRecordings(t *testing.T) []string {
	t.Helper()
	recs, err := filepath.Glob(filepath.Join("..", "tasks", "*", "recording"))
	if err != nil || len(recs) == 0 {
		t.Fatalf("no recordings under ../tasks: %v", err)
	}
	return recs
}

// bundleOf returns a bundle directory holding the recording rec (of any format) unpacked.
func bundleOf(t *testing.T, rec string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := Unpack(rec, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sameResponses checks that every entry of a answers exactly as the same entry of b:
// status, protocol, header fields, record id, size and body bytes.
func sameResponses(t *testing.T, a, b *Bundle) {
	t.Helper()
	if len(a.Entries) != len(b.Entries) {
		t.Fatalf("%d entries against %d", len(a.Entries), len(b.Entries))
	}
	for i := range a.Entries {
		ea, eb := &a.Entries[i], &b.Entries[i]
		ra, erra := a.Response(ea)
		rb, errb := b.Response(eb)
		if (erra == nil) != (errb == nil) {
			t.Fatalf("entry %s: errors %v and %v", ea.ID, erra, errb)
		}
		if erra != nil {
			continue
		}
		ba, err := io.ReadAll(ra.Body)
		if err != nil {
			t.Fatalf("entry %s: body: %v", ea.ID, err)
		}
		bb, err := io.ReadAll(rb.Body)
		if err != nil {
			t.Fatalf("entry %s: body: %v", eb.ID, err)
		}
		ha, _ := json.Marshal(ra.Header)
		hb, _ := json.Marshal(rb.Header)
		if ra.Status != rb.Status || ra.Proto != rb.Proto || ra.RecordID != rb.RecordID || ra.Size != rb.Size ||
			!bytes.Equal(ha, hb) || !bytes.Equal(ba, bb) {
			t.Fatalf("entry %s (%s) answers differently in place", ea.ID, ea.URL)
		}
	}
}

// TestInPlaceRealRecordings packs each shipped recording as format 3 (whole and in small
// parts), opens it in place, and checks that every entry answers exactly as from the
// unpacked bundle, that the audit passes, and that unpacking it again gives the bundle's
// bytes.
func TestInPlaceRealRecordings(t *testing.T) {
	for _, src := range realRecordings(t) {
		name := filepath.Base(filepath.Dir(src))
		t.Run(name, func(t *testing.T) {
			bundleDir := bundleOf(t, src)
			plain, err := OpenBundle(bundleDir)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			for _, partSize := range []int64{PartSize, 64 << 10} {
				rec := filepath.Join(t.TempDir(), "tasks", name, "recording")
				if err := PackParts(bundleDir, rec, partSize); err != nil {
					t.Fatal(err)
				}
				files, err := RecordingFiles(rec)
				if err != nil {
					t.Fatal(err)
				}
				if partSize == PartSize && (len(files) != 4 || filepath.Base(files[3]) != RecordingDataFile) {
					t.Errorf("files %v", baseNames(files))
				}
				for _, f := range files[3:] {
					if fi, _ := os.Stat(f); fi.Size() > partSize {
						// only a single member larger than a part makes a larger part
						if spans, err := inflateMembers(context.Background(), []string{f}, io.Discard, MaxWARCBytes, nil); err != nil || len(spans) != 1 {
							t.Errorf("part %s is %d bytes, %d members (%v)", f, fi.Size(), len(spans), err)
						}
					}
				}
				b, err := OpenBundle(rec)
				if err != nil {
					t.Fatal(err)
				}
				if !b.InPlace() {
					t.Errorf("not in place")
				}
				sameResponses(t, plain, b)
				sameResponses(t, plain, b) // again: from the member cache and cursors
				b.Close()
				if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "audit")); len(probs) > 0 {
					t.Errorf("audit: %s", problemText(probs))
				}
				back := bundleOf(t, rec)
				for _, n := range []string{WARCFile, EntriesFile, PagesFile} {
					if !bytes.Equal(mustRead(t, filepath.Join(bundleDir, n)), mustRead(t, filepath.Join(back, n))) {
						t.Errorf("%s differs after pack and unpack", n)
					}
				}
			}
		})
	}
}

// TestFormat3IsDeterministic: the same bundle packs to the same bytes, every member has a
// gzip header without name or time, and each part is a complete .warc.gz that any gzip
// reader inflates to whole records.
func TestFormat3IsDeterministic(t *testing.T) {
	bundleDir := bundleOf(t, realRecordings(t)[0])
	var hashes []string
	var rec string
	for range 2 {
		rec = filepath.Join(t.TempDir(), "tasks", "x", "recording")
		if err := PackParts(bundleDir, rec, 32<<10); err != nil {
			t.Fatal(err)
		}
		h, err := HashRecording(rec)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if hashes[0] != hashes[1] {
		t.Errorf("hashes %v", hashes)
	}
	files, _ := RecordingFiles(rec)
	if len(files) < 6 {
		t.Fatalf("want several parts, got %v", baseNames(files))
	}
	for _, f := range files[3:] {
		zr, err := gzip.NewReader(bytes.NewReader(mustRead(t, f)))
		if err != nil {
			t.Fatal(err)
		}
		if zr.Header.Name != "" || !zr.Header.ModTime.IsZero() || zr.Header.Comment != "" || zr.Header.Extra != nil {
			t.Errorf("%s: gzip header %+v", f, zr.Header)
		}
		data, err := io.ReadAll(zr) // multistream: the whole part
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("WARC/1.1\r\n")) || !bytes.HasSuffix(data, []byte("\r\n\r\n")) {
			t.Errorf("%s does not hold whole records", f)
		}
	}
}

// TestMigrateFormat2ToFormat3 converts a shipped (format 2) recording with MigrateRecording:
// the result is format 3, passes the audit, and holds the same bundle.
func TestMigrateFormat2ToFormat3(t *testing.T) {
	src := realRecordings(t)[0]
	bundleDir := bundleOf(t, src)
	rec := filepath.Join(t.TempDir(), "tasks", "x", "recording")
	if err := packParts2(bundleDir, rec, PartSize); err != nil {
		t.Fatal(err)
	}
	if f, _ := RecordingFormatOf(rec); f != RecordingFormat2 {
		t.Fatalf("format %d", f)
	}
	from, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work"))
	if err != nil || from != RecordingFormat2 {
		t.Fatalf("migrate: %d, %v", from, err)
	}
	if f, _ := RecordingFormatOf(rec); f != RecordingFormat {
		t.Fatalf("format after migration %d", f)
	}
	if _, err := os.Stat(filepath.Join(rec, RecordingWARCFile)); err == nil {
		t.Errorf("warc.tar.gz left behind")
	}
	if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "audit")); len(probs) > 0 {
		t.Errorf("audit: %s", problemText(probs))
	}
	back := bundleOf(t, rec)
	for _, n := range []string{WARCFile, EntriesFile, PagesFile} {
		if !bytes.Equal(mustRead(t, filepath.Join(bundleDir, n)), mustRead(t, filepath.Join(back, n))) {
			t.Errorf("%s differs after migration", n)
		}
	}
	if from, _, err := MigrateRecording(rec, filepath.Join(t.TempDir(), "work2")); err != nil || from != RecordingFormat {
		t.Errorf("second migrate: %d, %v", from, err)
	}
}

// editRecordingEntries rewrites entries.jsonl.gz of a format 3 recording through edit.
func editRecordingEntries(t *testing.T, rec string, edit func([]Entry)) {
	t.Helper()
	entries, err := readEntriesGz(filepath.Join(rec, RecordingEntriesFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	edit(entries)
	path := filepath.Join(rec, RecordingEntriesFile)
	os.Remove(path)
	if err := writeEntriesGz(path, entries); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "tasks", "x", "recording")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(src)
	for _, de := range des {
		if err := os.WriteFile(filepath.Join(dst, de.Name()), mustRead(t, filepath.Join(src, de.Name())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// allResponses reads every entry's response and body, and returns the first error.
func allResponses(b *Bundle) error {
	for i := range b.Entries {
		r, err := b.Response(&b.Entries[i])
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return err
		}
	}
	return nil
}

// TestInPlaceRefusesHostileRecordings: member fields out of range, a lying length (a
// decompression bomb), a truncated or corrupt member are each refused with the file and
// offset named, at open or when the record is read, never with a panic; and pab audit finds
// each.
func TestInPlaceRefusesHostileRecordings(t *testing.T) {
	bundleDir := bundleOf(t, realRecordings(t)[0])
	good := filepath.Join(t.TempDir(), "tasks", "x", "recording")
	if err := Pack(bundleDir, good); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(good, RecordingDataFile)
	size := int64(len(mustRead(t, data)))
	cases := []struct {
		name   string
		break_ func(t *testing.T, rec string)
		want   string // in the error of OpenBundle or of reading the responses
	}{
		{"offset past the part", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[0].RespGzOffset = size })
		}, "not a gzip member span"},
		{"negative offset", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[0].RespGzOffset = -1 })
		}, "not a gzip member span"},
		{"no such part", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[0].RespPart = 3 })
		}, "respPart 3"},
		{"bomb claim", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[0].RespLength = es[0].RespGzLength * 2000 })
		}, "decompression bomb"},
		{"overlapping records", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[1].RespOffset = es[0].RespOffset })
		}, "overlaps"},
		{"member of another record", func(t *testing.T, rec string) {
			editRecordingEntries(t, rec, func(es []Entry) { es[0].RespGzOffset, es[0].RespGzLength = es[1].RespGzOffset, es[1].RespGzLength })
		}, "gzip member"},
		{"truncated part", func(t *testing.T, rec string) {
			p := filepath.Join(rec, RecordingDataFile)
			b := mustRead(t, p)
			os.WriteFile(p, b[:len(b)-100], 0o644)
		}, "not a gzip member span"},
		{"corrupt byte", func(t *testing.T, rec string) {
			p := filepath.Join(rec, RecordingDataFile)
			b := mustRead(t, p)
			b[len(b)/2] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, RecordingDataFile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := copyDir(t, good)
			c.break_(t, rec)
			sameTable(t, rec) // the table written one entry at a time: the same error, or bytes
			b, err := OpenBundle(rec)
			if err == nil {
				err = allResponses(b)
				b.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if probs := AuditRecording(rec, filepath.Join(t.TempDir(), "audit")); len(probs) == 0 {
				t.Errorf("audit finds nothing")
			}
		})
	}
}

// TestInPlaceLargeRecordStreams: a record larger than the member cache's limit is
// streamed (and read twice, and concurrently with a small one), and a member that inflates
// to more than its record is refused when read to its end.
func TestInPlaceLargeRecordStreams(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", (smallMember*3)/16) + "tail"
	xs := handExchanges()
	xs[0].body = big
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, xs)
	rec := filepath.Join(t.TempDir(), "tasks", "hand", "recording")
	if err := Pack(bundleDir, rec); err != nil {
		t.Fatal(err)
	}
	plain, err := OpenBundle(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sameResponses(t, plain, b)
	r1, _ := b.Response(&b.Entries[0])
	r2, _ := b.Response(&b.Entries[0])
	var b1, b2 bytes.Buffer
	for { // interleaved reads of two streams of the same member
		buf := make([]byte, 7000)
		n1, e1 := r1.Body.Read(buf)
		b1.Write(buf[:n1])
		n2, e2 := r2.Body.Read(buf)
		b2.Write(buf[:n2])
		if e1 == io.EOF && e2 == io.EOF {
			break
		}
		if (e1 != nil && e1 != io.EOF) || (e2 != nil && e2 != io.EOF) {
			t.Fatal(e1, e2)
		}
	}
	if b1.String() != big || b2.String() != big {
		t.Errorf("interleaved streams differ")
	}

	// a record length one byte short of what the member holds
	editRecordingEntries(t, rec, func(es []Entry) { es[0].RespLength-- })
	b2x, err := OpenBundle(rec)
	if err == nil {
		var r *Response
		if r, err = b2x.Response(&b2x.Entries[0]); err == nil {
			_, err = io.Copy(io.Discard, r.Body)
		}
		b2x.Close()
	}
	if err == nil {
		t.Errorf("a member longer than its record was read without error")
	}
}

// FuzzOpenInPlace opens a format 3 recording whose data.warc.gz is fuzzed bytes (the real
// entries kept), and reads every response: errors, never a panic or an unbounded read.
func FuzzOpenInPlace(f *testing.F) {
	tmp := f.TempDir()
	xs := handExchanges()
	bundleDir := filepath.Join(tmp, "bundle")
	writeHandBundle(f, bundleDir, xs)
	good := filepath.Join(tmp, "good", "recording")
	if err := Pack(bundleDir, good); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(good, RecordingDataFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add([]byte{})
	n := 0
	f.Fuzz(func(t *testing.T, archive []byte) {
		n++
		rec := filepath.Join(t.TempDir(), fmt.Sprint(n), "recording")
		os.MkdirAll(rec, 0o755)
		for _, name := range []string{RecordingManifestFile, RecordingPagesFile, RecordingEntriesFile} {
			os.WriteFile(filepath.Join(rec, name), mustReadTB(t, filepath.Join(good, name)), 0o644)
		}
		os.WriteFile(filepath.Join(rec, RecordingDataFile), archive, 0o644)
		b, err := OpenBundle(rec)
		if err != nil {
			return
		}
		defer b.Close()
		for i := range b.Entries {
			r, err := b.Response(&b.Entries[i])
			if err != nil {
				continue
			}
			if n, _ := io.Copy(io.Discard, r.Body); n > r.Size {
				t.Fatalf("entry %s: read %d bytes of a %d-byte body", b.Entries[i].ID, n, r.Size)
			}
		}
	})
}

func mustReadTB(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAuditRecordingNamesCorruptMember: a format 3 recording with one record's gzip member
// corrupted is one problem of pab audit naming the part file, the member's offset and the
// entry whose record it holds; member fields that do not match the archive are a problem
// of entries.jsonl.gz naming the entry and the field.
func TestAuditRecordingNamesCorruptMember(t *testing.T) {
	bundleDir := bundleOf(t, realRecordings(t)[0])
	good := filepath.Join(t.TempDir(), "tasks", "x", "recording")
	if err := PackParts(bundleDir, good, 64<<10); err != nil {
		t.Fatal(err)
	}
	if probs := AuditRecording(good, filepath.Join(t.TempDir(), "audit")); len(probs) > 0 {
		t.Fatalf("the good recording: %s", problemText(probs))
	}
	entries, err := readEntriesGz(filepath.Join(good, RecordingEntriesFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := RecordingFiles(good)
	if len(files) < 5 {
		t.Fatalf("want parts, got %v", baseNames(files))
	}
	// the largest member of the last part, so that the flip lands in its deflate data
	var e *Entry
	last := len(files) - 4
	for i := range entries {
		if c := &entries[i]; c.RespPart == last && (e == nil || c.RespGzLength > e.RespGzLength) {
			e = c
		}
	}
	if e == nil || e.RespGzLength < 64 {
		t.Fatalf("no member to corrupt in part %d", last)
	}

	rec := copyDir(t, good)
	part := filepath.Join(rec, filepath.Base(files[3+last]))
	data := mustRead(t, part)
	for k := int64(20); k < e.RespGzLength-8; k += 7 { // the deflate data, not the header or trailer
		data[e.RespGzOffset+k] ^= 0x5a
	}
	os.WriteFile(part, data, 0o644)
	probs := AuditRecording(rec, filepath.Join(t.TempDir(), "audit"))
	if len(probs) != 1 {
		t.Fatalf("want one problem, got:\n%s", problemText(probs))
	}
	p := probs[0]
	if p.File != part || p.Where != "entry "+e.ID || !strings.Contains(p.Msg, fmt.Sprintf("offset %d", e.RespGzOffset)) {
		t.Errorf("problem %+v; want file %s, entry %s, offset %d", p, part, e.ID, e.RespGzOffset)
	}

	// member fields pointing at the wrong bytes of a sound archive
	rec = copyDir(t, good)
	editRecordingEntries(t, rec, func(es []Entry) {
		for i := range es {
			if es[i].ID == e.ID {
				es[i].RespGzLength++
			}
		}
	})
	text := problemText(AuditRecording(rec, filepath.Join(t.TempDir(), "audit")))
	if want := RecordingEntriesFile + ": entry " + e.ID + ": respPart"; !strings.Contains(text, want) {
		t.Errorf("audit of a wrong respGzLength:\n%s\nwant %q", text, want)
	}
}

// FuzzInPlaceEntries opens a format 3 recording whose entries.jsonl.gz holds fuzzed JSON
// lines (the real archive kept; seeds: the real lines, and lines with member fields moved
// out of range, onto one another, or claiming huge records), then reads every response:
// errors, never a panic, a read past a body or an allocation beyond the record bounds; and
// WriteEntryTable gives the same table, or the same error, as OpenBundle and
// EncodeEntryTable.
func FuzzInPlaceEntries(f *testing.F) {
	tmp := f.TempDir()
	bundleDir := filepath.Join(tmp, "bundle")
	writeHandBundle(f, bundleDir, handExchanges())
	good := filepath.Join(tmp, "good", "recording")
	if err := Pack(bundleDir, good); err != nil {
		f.Fatal(err)
	}
	entries, err := readEntriesGz(filepath.Join(good, RecordingEntriesFile), nil)
	if err != nil {
		f.Fatal(err)
	}
	lines := func(es []Entry) []byte {
		var buf bytes.Buffer
		for i := range es {
			if err := writeJSONLine(&buf, &es[i]); err != nil {
				f.Fatal(err)
			}
		}
		return buf.Bytes()
	}
	f.Add(lines(entries))
	for _, edit := range []func(e []Entry){
		func(e []Entry) { e[0].RespGzOffset = 1 << 40 },
		func(e []Entry) { e[1].RespGzOffset, e[1].RespGzLength = e[0].RespGzOffset, e[0].RespGzLength },
		func(e []Entry) { e[0].RespLength = 1 << 30 },
		func(e []Entry) { e[0].RespPart = 1 },
		func(e []Entry) { e[0].ReqGzLength, e[0].ReqLength = 0, 0 },
		func(e []Entry) { e[0].RespOffset, e[1].RespOffset = e[1].RespOffset, e[0].RespOffset },
	} {
		es := slices.Clone(entries)
		edit(es)
		f.Add(lines(es))
	}
	n := 0
	f.Fuzz(func(t *testing.T, jsonl []byte) {
		n++
		rec := filepath.Join(t.TempDir(), fmt.Sprint(n), "recording")
		os.MkdirAll(rec, 0o755)
		for _, name := range []string{RecordingManifestFile, RecordingPagesFile, RecordingDataFile} {
			os.WriteFile(filepath.Join(rec, name), mustReadTB(t, filepath.Join(good, name)), 0o644)
		}
		var zbuf bytes.Buffer
		zw := gzip.NewWriter(&zbuf)
		zw.Write(jsonl)
		zw.Close()
		os.WriteFile(filepath.Join(rec, RecordingEntriesFile), zbuf.Bytes(), 0o644)
		sameTable(t, rec) // the table written one line at a time: the same bytes or error
		b, err := OpenBundle(rec)
		if err != nil {
			return
		}
		defer b.Close()
		for i := range b.Entries {
			r, err := b.Response(&b.Entries[i])
			if err != nil {
				continue
			}
			if n, _ := io.Copy(io.Discard, r.Body); n > r.Size {
				t.Fatalf("entry %s: read %d bytes of a %d-byte body", b.Entries[i].ID, n, r.Size)
			}
		}
	})
}

// TestInPlaceConcurrentReads: eight goroutines read every response of one format 3
// recording at once (small members through the member cache, a large one streamed through
// cursors), each body equal to the unpacked bundle's. Run with -race.
func TestInPlaceConcurrentReads(t *testing.T) {
	xs := handExchanges()
	xs[0].body = strings.Repeat("0123456789abcdef", (smallMember*2)/16) + "tail"
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, xs)
	rec := filepath.Join(t.TempDir(), "tasks", "hand", "recording")
	if err := Pack(bundleDir, rec); err != nil {
		t.Fatal(err)
	}
	plain, err := OpenBundle(bundleDir)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	want := make([][]byte, len(plain.Entries))
	for i := range plain.Entries {
		r, err := plain.Response(&plain.Entries[i])
		if err != nil {
			continue // an unresolved revisit: nil, and an error in place too
		}
		want[i], _ = io.ReadAll(r.Body)
	}
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for k := range 3 * len(b.Entries) {
				i := (k + g) % len(b.Entries)
				r, err := b.Response(&b.Entries[i])
				if (err != nil) != (want[i] == nil) {
					errs <- fmt.Errorf("entry %s: %v", b.Entries[i].ID, err)
					return
				}
				if err != nil {
					continue
				}
				got, err := io.ReadAll(r.Body)
				if err != nil || !bytes.Equal(got, want[i]) {
					errs <- fmt.Errorf("entry %s: %d bytes, %v; want %d bytes", b.Entries[i].ID, len(got), err, len(want[i]))
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestInPlaceLargeMemberCRC: a body over smallMember is streamed from its member; one whose
// bytes were changed (the gzip CRC-32 no longer matches) fails before its end is handed
// out, instead of being served whole as if it were the recording (review finding: the
// trailer was checked only when a read reached the record's end, which a body never does).
func TestInPlaceLargeMemberCRC(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", (smallMember*3)/16) + "tail"
	xs := handExchanges()
	xs[0].body = big
	bundleDir := filepath.Join(t.TempDir(), "bundle")
	writeHandBundle(t, bundleDir, xs)
	rec := filepath.Join(t.TempDir(), "tasks", "hand", "recording")
	if err := PackParts(bundleDir, rec, 1<<40); err != nil {
		t.Fatal(err)
	}
	read := func() ([]byte, error) {
		b, err := OpenBundle(rec)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r, err := b.Response(&b.Entries[0])
		if err != nil {
			t.Fatal(err)
		}
		return io.ReadAll(r.Body)
	}
	if got, err := read(); err != nil || string(got) != big {
		t.Fatalf("intact member: %d bytes, %v", len(got), err)
	}
	// the same record gzipped again with one payload byte changed, the old CRC-32 kept
	b, err := OpenBundle(rec)
	if err != nil {
		t.Fatal(err)
	}
	e := b.Entries[0]
	b.Close()
	data := filepath.Join(rec, RecordingDataFile)
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	m := raw[e.RespGzOffset : e.RespGzOffset+e.RespGzLength]
	zr, err := gzip.NewReader(bytes.NewReader(m))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	plain[bytes.Index(plain, []byte("0123456789abcdef"))+100] = 'X'
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	zw.Write(plain)
	zw.Close()
	nm := buf.Bytes()
	copy(nm[len(nm)-8:], m[len(m)-8:len(m)-4]) // the old CRC-32: wrong for these bytes
	out := append(append(append([]byte{}, raw[:e.RespGzOffset]...), nm...), raw[e.RespGzOffset+e.RespGzLength:]...)
	delta := int64(len(nm)) - e.RespGzLength
	if err := os.WriteFile(data, out, 0o644); err != nil {
		t.Fatal(err)
	}
	editRecordingEntries(t, rec, func(es []Entry) {
		for j := range es {
			if j == 0 {
				es[j].RespGzLength = int64(len(nm))
			} else if es[j].RespGzOffset > e.RespGzOffset {
				es[j].RespGzOffset += delta
			}
			if es[j].ReqLength > 0 && es[j].ReqGzOffset > e.RespGzOffset {
				es[j].ReqGzOffset += delta
			}
		}
	})
	got, err := read()
	if err == nil || !strings.Contains(err.Error(), "data.warc.gz") {
		t.Fatalf("damaged member served: %d bytes (X: %v), err %v", len(got), bytes.Contains(got, []byte("X")), err)
	}
	if len(got) >= len(big) {
		t.Errorf("the whole damaged body (%d bytes) was handed out before the error", len(got))
	}
}

// TestInPlaceEntriesHintBounded: the inflated size an entries.jsonl.gz trailer claims is
// capped by the file's own size, so four hostile bytes cannot make OpenBundle allocate
// hundreds of MB ahead (review finding: 317 MB for a 436-byte file).
func TestInPlaceEntriesHintBounded(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "entries-*.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 436)
	copy(body[len(body)-4:], []byte{0xff, 0xff, 0xff, 0xff})
	f.Write(body)
	defer f.Close()
	if h := entriesHint(f); h > 436*64/400 {
		t.Errorf("hint %d entries for a 436-byte file claiming 4 GiB", h)
	}
}
