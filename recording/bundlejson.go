package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file reads a bundle's JSON files (manifest.json, entries.jsonl, pages.jsonl):
// strictly, line by line, within size bounds, with a fast path for entry lines.

// manifestWithLegacy is Manifest plus the legacy fields of legacyManifestFields, which a
// reader accepts and ignores. Keep the two lists in step (TestReadManifestLegacyFields).
type manifestWithLegacy struct {
	Manifest
	// StartURL is seed 003's start_url, written by recorders before format 2; replay opens
	// the first recorded page instead.
	StartURL *string `json:"start_url"`
}

// readManifest reads manifest.json from r (at most MaxManifestBytes); path names it in
// errors. Unknown fields, trailing data, timestamps that are not RFC 3339, a locale that is
// not a BCP 47 tag and a timezone time.LoadLocation cannot load are errors;
// the legacy fields (legacyManifestFields: start_url) are accepted, if of the right type,
// and ignored.
// ReadBundleManifest reads the manifest.json of the bundle directory dir (within
// MaxManifestBytes, strictly, as OpenBundle does) without reading its entries or pages.
// Errors name the file.
func ReadBundleManifest(dir string) (Manifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	f, err := openBundleFile(root, dir, ManifestFile)
	if err != nil {
		return Manifest{}, err
	}
	defer f.Close()
	return readManifest(f, filepath.Join(dir, ManifestFile))
}

// EachBundlePage calls fn with each line of the pages.jsonl of the bundle directory dir, in
// order, read as OpenBundle reads it but one line at a time; an error of fn stops it and is
// returned. Errors name the file and line.
func EachBundlePage(dir string, fn func(p *Page) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	f, err := openBundleFile(root, dir, PagesFile)
	if err != nil {
		return err
	}
	defer f.Close()
	return eachPage(f, filepath.Join(dir, PagesFile), fn)
}

func readManifest(r io.Reader, path string) (Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxManifestBytes {
		return Manifest{}, fmt.Errorf("read %s: larger than %d bytes", path, MaxManifestBytes)
	}
	lm, err := decodeStrictJSON[manifestWithLegacy](data)
	if err != nil {
		return Manifest{}, fmt.Errorf("read %s: %w", path, err)
	}
	m := &lm.Manifest
	for _, f := range []struct{ name, v string }{{"captured_from", m.CapturedFrom}, {"captured_to", m.CapturedTo}} {
		if f.v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, f.v); err != nil {
			return Manifest{}, fmt.Errorf("read %s: %s: %q is not an RFC 3339 time", path, f.name, f.v)
		}
	}
	if err := checkManifestLocale(m, path); err != nil {
		return Manifest{}, err
	}
	return *m, nil
}

// readEntries reads indexes/entries.jsonl from r and checks each entry: a unique non-empty
// id, method and url, a status from 100 to 999, and record spans inside an archive of
// warcSize bytes (the request record may be absent: reqLength 0).
func readEntries(r io.Reader, path string, warcSize int64) ([]Entry, error) {
	entries, _, err := readEntriesIndexed(r, path, warcSize, 0)
	return entries, err
}

// readEntriesIndexed is readEntries that also returns the map from entry id to its index
// in entries (Bundle.byID), built while reading rather than after. capHint is the number
// of entries expected (0: unknown); it only sizes the first allocation, at most
// maxEntriesHint.
func readEntriesIndexed(r io.Reader, path string, warcSize int64, capHint int) ([]Entry, map[string]int, error) {
	capHint = min(max(capHint, 0), maxEntriesHint)
	entries := make([]Entry, 0, capHint)
	seen := make(map[string]int, capHint) // id -> index in entries
	var lines []int32                     // line of each entry, for the duplicate error
	err := readJSONL(r, path, MaxEntryLineBytes, decodeEntryFast, func(line int, e *Entry) error {
		if err := checkEntryFields(e); err != nil {
			return err
		}
		if first, dup := seen[e.ID]; dup {
			return fmt.Errorf("id %q already on line %d", e.ID, lines[first])
		}
		if err := checkEntrySpans(e, warcSize); err != nil {
			return err
		}
		seen[e.ID] = len(entries)
		lines = append(lines, int32(min(line, math.MaxInt32)))
		entries = append(entries, *e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return entries, seen, nil
}

// checkEntryFields checks the fields of one entries.jsonl line that need no other line:
// id, method and url present, a status of three digits, a size not negative, a revisitOf
// that is not the entry itself.
func checkEntryFields(e *Entry) error {
	switch {
	case e.ID == "":
		return errors.New("no id")
	case e.Method == "":
		return errors.New("no method")
	case e.URL == "":
		return errors.New("no url")
	case e.Status < 100 || e.Status > 999:
		return fmt.Errorf("status %d out of range", e.Status)
	case e.Size < 0:
		return fmt.Errorf("negative size %d", e.Size)
	case e.RevisitOf == e.ID:
		return errors.New("revisitOf names the entry itself")
	}
	return nil
}

// checkEntrySpans checks that an entry's records lie inside an archive of warcSize bytes.
func checkEntrySpans(e *Entry, warcSize int64) error {
	if err := checkSpan("resp", e.RespOffset, e.RespLength, warcSize, false); err != nil {
		return err
	}
	return checkSpan("req", e.ReqOffset, e.ReqLength, warcSize, true)
}

// eachEntry reads entries.jsonl from r one line at a time, with the checks of
// readEntriesIndexed (a duplicate id is found by its 128-bit key, hkeyOf: the set holds 16
// bytes an entry, not the ids), and calls fn with each entry (valid until fn returns).
func eachEntry(r io.Reader, path string, warcSize int64, fn func(line int, e *Entry) error) error {
	seen := map[hkey]int32{} // id key -> line
	return readJSONL(r, path, MaxEntryLineBytes, decodeEntryFast, func(line int, e *Entry) error {
		if err := checkEntryFields(e); err != nil {
			return err
		}
		k := hkeyOf(e.ID)
		if first, dup := seen[k]; dup {
			return fmt.Errorf("id %q already on line %d", e.ID, first)
		}
		if err := checkEntrySpans(e, warcSize); err != nil {
			return err
		}
		seen[k] = int32(min(line, math.MaxInt32))
		return fn(line, e)
	})
}

// maxEntriesHint bounds the capacity readEntriesIndexed allocates ahead from a hint.
const maxEntriesHint = 1 << 20

// checkSpan checks that [off, off+length) lies inside a file of size bytes.
func checkSpan(what string, off, length, size int64, mayBeEmpty bool) error {
	if off < 0 || length < 0 || (length == 0 && !mayBeEmpty) {
		return fmt.Errorf("%sOffset %d, %sLength %d: not a record span", what, off, what, length)
	}
	if length > size || off > size-length {
		return fmt.Errorf("%sOffset %d + %sLength %d is past the end of %s (%d bytes)", what, off, what, length, WARCFile, size)
	}
	return nil
}

// readPages reads pages/pages.jsonl from r; every page needs a url.
func readPages(r io.Reader, path string) ([]Page, error) {
	var pages []Page
	err := eachPage(r, path, func(p *Page) error {
		pages = append(pages, *p)
		return nil
	})
	return pages, err
}

// eachPage reads pages.jsonl from r one line at a time with readPages' checks and calls fn
// with each page (valid until fn returns).
func eachPage(r io.Reader, path string, fn func(p *Page) error) error {
	return readJSONL(r, path, MaxPageLineBytes, nil, func(_ int, p *Page) error {
		if p.URL == "" {
			return errors.New("no url")
		}
		return fn(p)
	})
}

// readJSONL calls each for every non-blank line of r decoded strictly into a T, with the
// 1-based line number. Lines longer than maxLine bytes are errors. Errors name path and line.
// When fast is not nil it is tried first on each line: it decodes into a zero T and reports
// true only when the result is exactly what the strict decoder gives; otherwise the line
// goes through decodeStrictJSON. The *T given to each is only valid during the call.
func readJSONL[T any](r io.Reader, path string, maxLine int, fast func(data []byte, v *T) bool, each func(line int, v *T) error) error {
	var buf T
	line, err := scanLines(r, maxLine, func(line int, data []byte) error {
		var v *T
		var err error
		if fast != nil {
			var zero T
			buf = zero
			if fast(data, &buf) {
				v = &buf
			}
		}
		if v == nil {
			v, err = decodeStrictJSON[T](data)
		}
		if err == nil {
			err = each(line, v)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("read %s line %d: longer than %d bytes", path, line, maxLine)
	default:
		return fmt.Errorf("read %s line %d: %w", path, line, err)
	}
}

// scanLines calls each with every line of r that is not blank, spaces trimmed, numbered
// from 1, and stops at the first error of each or of reading (bufio.ErrTooLong for a line
// longer than max bytes); it returns the number of the line that failed with the error.
func scanLines(r io.Reader, max int, each func(line int, data []byte) error) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max)
	line := 0
	for sc.Scan() {
		line++
		data := bytes.TrimSpace(sc.Bytes())
		if len(data) == 0 {
			continue
		}
		if err := each(line, data); err != nil {
			return line, err
		}
	}
	return line + 1, sc.Err()
}

// decodeStrictJSON decodes one JSON object from data into a new T: unknown fields, a value
// that is not an object, and anything after the object are errors, which give the byte
// offset where the JSON decoder reports one.
func decodeStrictJSON[T any](data []byte) (*T, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v *T
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("at byte %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("at byte %d: %w", te.Offset, err)
		}
		return nil, err
	}
	if v == nil {
		return nil, errors.New("not a JSON object")
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("at byte %d: data after the JSON object", end)
	}
	return v, nil
}

// decodeEntryFast decodes one line of indexes/entries.jsonl of the shape pab writes, without
// reflection: an object whose keys are spelled exactly as Entry's JSON names, whose strings
// hold no escapes, no control bytes and only valid UTF-8, whose numbers are integers without
// fraction or exponent that fit their field, and whose booleans are true or false, with
// JSON white space between tokens and nothing after the object. For such a line it fills
// e (which must be zero) exactly as decodeStrictJSON would and returns true. For anything
// else (unknown or differently cased keys, escapes, null, other types, bad syntax) it
// returns false and e's content is undefined: the caller decodes the line strictly, which
// gives the error or the value. The strings of e share one copy of data.
func decodeEntryFast(data []byte, e *Entry) bool {
	p := entryParser{s: string(data)}
	p.ws()
	if !p.byte('{') {
		return false
	}
	p.ws()
	if p.byte('}') {
		p.ws()
		return p.i == len(p.s)
	}
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if !p.byte(':') {
			return false
		}
		p.ws()
		switch key {
		case "id":
			e.ID, ok = p.str()
		case "ts":
			e.TS, ok = p.str()
		case "method":
			e.Method, ok = p.str()
		case "url":
			e.URL, ok = p.str()
		case "status":
			var n int64
			n, ok = p.int(strconv.IntSize)
			e.Status = int(n)
		case "mime":
			e.Mime, ok = p.str()
		case "digest":
			e.Digest, ok = p.str()
		case "size":
			e.Size, ok = p.int(64)
		case "reqOffset":
			e.ReqOffset, ok = p.int(64)
		case "reqLength":
			e.ReqLength, ok = p.int(64)
		case "respOffset":
			e.RespOffset, ok = p.int(64)
		case "respLength":
			e.RespLength, ok = p.int(64)
		case "reqBody":
			e.ReqBody, ok = p.str()
		case "reqType":
			e.ReqType, ok = p.str()
		case "revisitOf":
			e.RevisitOf, ok = p.str()
		case "unresolved":
			e.Unresolved, ok = p.bool()
		case "type":
			e.ResourceType, ok = p.str()
		case "respPart":
			var n int64
			n, ok = p.int(strconv.IntSize)
			e.RespPart = int(n)
		case "respGzOffset":
			e.RespGzOffset, ok = p.int(64)
		case "respGzLength":
			e.RespGzLength, ok = p.int(64)
		case "reqPart":
			var n int64
			n, ok = p.int(strconv.IntSize)
			e.ReqPart = int(n)
		case "reqGzOffset":
			e.ReqGzOffset, ok = p.int(64)
		case "reqGzLength":
			e.ReqGzLength, ok = p.int(64)
		default:
			return false // unknown, or a case-folded match: the strict decoder decides
		}
		if !ok {
			return false
		}
		p.ws()
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return false
		}
		p.ws()
		return p.i == len(p.s)
	}
}

// entryParser is the cursor of decodeEntryFast.
type entryParser struct {
	s string
	i int
}

func (p *entryParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *entryParser) byte(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes or control bytes, holding only valid UTF-8.
func (p *entryParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	ascii := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			if !ascii && !utf8.ValidString(v) {
				return "", false // the strict decoder replaces bad bytes with U+FFFD
			}
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// int reads an integer in JSON syntax (-?(0|[1-9][0-9]*)) that fits bits, with no fraction
// or exponent after it.
func (p *entryParser) int(bits int) (int64, bool) {
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.s[digits] == '0' && p.i > digits+1) {
		return 0, false
	}
	if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(p.s[start:p.i], 10, bits)
	return n, err == nil
}

func (p *entryParser) bool() (bool, bool) {
	switch {
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return true, true
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return false, true
	}
	return false, false
}
