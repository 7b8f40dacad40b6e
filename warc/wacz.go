package warc

// wacz.go: WACZ 1.1.1 (Web Archive Collection Zipped, https://specs.webrecorder.net/wacz/1.1.1/)
// export of a bundle, and the reading of a WACZ's WARC files for import.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// WACZVersion is the WACZ version ExportWACZ writes (datapackage.json wacz_version).
const WACZVersion = "1.1.1"

// Paths of the files ExportWACZ writes inside the ZIP (WACZ 1.1.1 "Directory Layout").
const (
	WACZWARCFile     = "archive/data.warc.gz"
	WACZIndexFile    = "indexes/index.cdx"
	WACZPagesFile    = "pages/pages.jsonl"
	WACZPackageFile  = "datapackage.json"
	WACZDigestFile   = "datapackage-digest.json"
	waczPagesFormat  = "json-pages-1.0"
	waczProfile      = "data-package"
	waczSoftwareName = "pab"
)

// Bounds for reading a WACZ given to ImportWARCs. Every WACZ is treated as hostile.
const (
	// MaxWACZMembers bounds the number of files in a WACZ's ZIP directory.
	MaxWACZMembers = 100000
	// MaxWACZMemberBytes bounds the uncompressed size a WARC member of a WACZ may claim:
	// 64 GiB. The reader also stops at the claimed size, so a member cannot inflate past it.
	MaxWACZMemberBytes int64 = 64 << 30
)

// WACZPackage is datapackage.json of a WACZ (WACZ 1.1.1 "datapackage.json", a Frictionless
// Data Package): profile "data-package", the WACZ version, and one resource per file.
type WACZPackage struct {
	Profile     string `json:"profile"`
	WACZVersion string `json:"wacz_version"`
	Title       string `json:"title,omitempty"`
	// Created is an RFC 3339 time; ExportWACZ writes the recording's captured_to so that
	// the same bundle always gives the same bytes.
	Created      string         `json:"created,omitempty"`
	Software     string         `json:"software,omitempty"`
	MainPageURL  string         `json:"mainPageUrl,omitempty"`
	MainPageDate string         `json:"mainPageDate,omitempty"`
	Resources    []WACZResource `json:"resources"`
}

// WACZResource is one file of a WACZ in datapackage.json: its name, its path inside the
// ZIP, "sha256:" and the lowercase hex sha256 of its bytes, and its size in bytes.
type WACZResource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// WACZDigest is datapackage-digest.json (WACZ 1.1.1): the hash of datapackage.json.
type WACZDigest struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// cdxjFields is the JSON part of one CDXJ line, in the field order pywb writes.
type cdxjFields struct {
	URL         string `json:"url"`
	Mime        string `json:"mime,omitempty"`
	Status      string `json:"status"`
	Digest      string `json:"digest,omitempty"`
	Length      string `json:"length"`
	Offset      string `json:"offset"`
	Filename    string `json:"filename"`
	Method      string `json:"method,omitempty"`
	RequestBody string `json:"requestBody,omitempty"`
}

// ExportWACZ writes the recording of b as a WACZ 1.1.1 file at path, a ZIP holding, in this
// order:
//
//   - archive/data.warc.gz: ExportWARC with one gzip member per record;
//   - indexes/index.cdx: a CDXJ index (pywb's format: SURT key, 14-digit timestamp, JSON
//     with url, mime, status, digest, length, offset, filename) of every response and
//     revisit record, sorted by key then timestamp (recording order breaks ties). Keys
//     are made as warcio.js, and so ReplayWeb.page, make them (see SURT); a request with a
//     method other than GET gets "__wb_method=post" and its body appended to the URL's
//     query (see methodQuery), so a replay tool finds the answer to that POST (a
//     multipart body is the one kind warcio.js keys differently);
//   - pages/pages.jsonl: the "json-pages-1.0" header line, then the bundle's pages (not
//     the not-found probes) with id, url, ts and title;
//   - datapackage.json: profile, wacz_version, title, created, software, mainPageUrl,
//     mainPageDate, and a resource (path, sha256 hash, bytes) for each file above;
//   - datapackage-digest.json: the sha256 of datapackage.json.
//
// Every member is stored (not deflated): the WARC is already compressed and replay tools
// read it at the CDXJ offsets. Output is deterministic: every member's modification time,
// and datapackage.json "created", is the recording's captured_to. The file is written
// beside path and renamed into place.
func ExportWACZ(b *Bundle, path string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".warc-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()
	sum := sha256.New()
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, sum, crc), 256<<10)
	recs, err := exportWARC(b, bw, true, path2name(WACZWARCFile))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	index, err := cdxjIndex(b, recs, path2name(WACZWARCFile))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	pages, err := waczPages(b)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	mtime := waczTime(b)
	pkg := WACZPackage{
		Profile:     waczProfile,
		WACZVersion: WACZVersion,
		Title:       waczTitle(b),
		Created:     mtime.Format(time.RFC3339),
		Software:    waczSoftwareName,
		Resources: []WACZResource{
			{Name: path2name(WACZWARCFile), Path: WACZWARCFile, Hash: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Bytes: size},
			resourceOf(WACZIndexFile, index),
			resourceOf(WACZPagesFile, pages),
		},
	}
	for _, p := range b.Pages {
		if p.Note == "" {
			pkg.MainPageURL, pkg.MainPageDate = p.URL, p.TS
			break
		}
	}
	pkgJSON, err := json.MarshalIndent(pkg, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	pkgJSON = append(pkgJSON, '\n')
	digJSON, err := json.MarshalIndent(WACZDigest{Path: WACZPackageFile, Hash: "sha256:" + sha256Hex(pkgJSON)}, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	digJSON = append(digJSON, '\n')

	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		if err := storeMember(zw, WACZWARCFile, mtime, tmp, uint64(size), crc.Sum32()); err != nil {
			return err
		}
		for _, m := range []struct {
			name string
			data []byte
		}{{WACZIndexFile, index}, {WACZPagesFile, pages}, {WACZPackageFile, pkgJSON}, {WACZDigestFile, digJSON}} {
			if err := storeMember(zw, m.name, mtime, bytes.NewReader(m.data), uint64(len(m.data)), crc32.ChecksumIEEE(m.data)); err != nil {
				return err
			}
		}
		return zw.Close()
	})
}

// storeMember adds one stored (uncompressed) member to zw, sizes and CRC given up front
// so no data descriptor follows it.
func storeMember(zw *zip.Writer, name string, mtime time.Time, r io.Reader, size uint64, crc uint32) error {
	fh := &zip.FileHeader{
		Name:               name,
		Method:             zip.Store,
		CRC32:              crc,
		CompressedSize64:   size,
		UncompressedSize64: size,
	}
	// CreateRaw writes the MS-DOS date and time fields as given (it ignores Modified).
	fh.ModifiedDate, fh.ModifiedTime = msDosTime(mtime)
	fh.SetMode(0o644)
	w, err := zw.CreateRaw(fh)
	if err != nil {
		return fmt.Errorf("zip %s: %w", name, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		return fmt.Errorf("zip %s: %w", name, err)
	}
	if uint64(n) != size {
		return fmt.Errorf("zip %s: wrote %d bytes, expected %d", name, n, size)
	}
	return nil
}

// msDosTime is t (UTC) as a ZIP MS-DOS date and time (APPNOTE.TXT 4.4.6: two-second
// resolution, years 1980 to 2107; earlier times give 1980-01-01 00:00:00).
func msDosTime(t time.Time) (date, clock uint16) {
	t = t.UTC()
	if t.Year() < 1980 {
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if t.Year() > 2107 {
		t = time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)
	}
	date = uint16(t.Day() + int(t.Month())<<5 + (t.Year()-1980)<<9)
	clock = uint16(t.Second()/2 + t.Minute()<<5 + t.Hour()<<11)
	return date, clock
}

func resourceOf(p string, data []byte) WACZResource {
	return WACZResource{Name: path2name(p), Path: p, Hash: "sha256:" + sha256Hex(data), Bytes: int64(len(data))}
}

func path2name(p string) string { return path.Base(p) }

// waczTime is the recording's captured_to (else its start, see exportDate), in UTC to the
// second: the modification time of every member and datapackage.json "created".
func waczTime(b *Bundle) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, b.Manifest.CapturedTo); err == nil {
		return t.UTC().Truncate(time.Second)
	}
	return exportDate(b).Truncate(time.Second)
}

// waczTitle is the first page's title, else the task id.
func waczTitle(b *Bundle) string {
	for _, p := range b.Pages {
		if p.Note == "" && p.Title != "" {
			return p.Title
		}
	}
	return b.Manifest.TaskID
}

// waczPage is one line of a WACZ's pages/pages.jsonl (WACZ 1.1.1 "pages.jsonl").
type waczPage struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	TS    string `json:"ts"`
	Title string `json:"title,omitempty"`
}

// waczPages builds pages/pages.jsonl: the format header line, then one line per page
// (ids "p1", "p2", ... in visit order), not-found probes left out.
func waczPages(b *Bundle) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeJSONLine(&buf, map[string]string{"format": waczPagesFormat, "id": "pages", "title": "All Pages"}); err != nil {
		return nil, err
	}
	n := 0
	for _, p := range b.Pages {
		if p.Note != "" {
			continue
		}
		n++
		if err := writeJSONLine(&buf, waczPage{ID: "p" + strconv.Itoa(n), URL: p.URL, TS: p.TS, Title: p.Title}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// cdxjIndex builds the CDXJ lines of recs (see ExportWACZ), sorted.
func cdxjIndex(b *Bundle, recs []exportedRecord, filename string) ([]byte, error) {
	type line struct {
		key, ts string
		json    []byte
	}
	lines := make([]line, 0, len(recs))
	for _, r := range recs {
		e := r.e
		t, err := time.Parse(time.RFC3339Nano, e.TS)
		if err != nil {
			return nil, fmt.Errorf("entry %s: ts %q is not an RFC 3339 time", e.ID, e.TS)
		}
		f := cdxjFields{
			URL:      e.URL,
			Mime:     e.Mime,
			Status:   strconv.Itoa(e.Status),
			Length:   strconv.FormatInt(r.length, 10),
			Offset:   strconv.FormatInt(r.off, 10),
			Filename: filename,
		}
		if r.revisit {
			f.Mime = "warc/revisit"
		}
		// the digest without its "sha256:", as warcio.js's and pywb's indexers write it
		f.Digest = e.Digest
		if e.Unresolved {
			// what the input's revisit record said (kept in its WARC-Payload-Digest)
			rec, err := ReadRecordAt(b.warc, filepath.Join(b.Dir, WARCFile), e.RespOffset, e.RespLength)
			if err != nil {
				return nil, err
			}
			d := rec.Get("WARC-Payload-Digest")
			f.Digest = d[strings.IndexByte(d, ':')+1:]
		}
		keyURL := e.URL
		if e.Method != "GET" {
			body, err := b.RequestBody(e)
			if err != nil {
				return nil, err
			}
			var extra string
			extra, f.RequestBody = methodQuery(e.Method, e.ReqType, body)
			f.Method = e.Method
			keyURL = appendQuery(e.URL, extra)
		}
		var buf bytes.Buffer
		if err := writeJSONLine(&buf, f); err != nil {
			return nil, err
		}
		lines = append(lines, line{key: SURT(keyURL), ts: t.UTC().Format("20060102150405"), json: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))})
	}
	slices.SortStableFunc(lines, func(a, b line) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.ts, b.ts)
	})
	var out bytes.Buffer
	for _, l := range lines {
		out.WriteString(l.key + " " + l.ts + " ")
		out.Write(l.json)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// maxPostQuery bounds the request body text appended to a CDXJ key, in bytes, as
// warcio.js does (4096).
const maxPostQuery = 4096

// methodQuery is what warcio.js's indexer (and ReplayWeb.page's lookup) appends to the
// query of a request that is not a GET: "__wb_method=" and the method, then "&" and the
// body as query text: a form body as it is, a JSON (or text/plain) body as its fields
// (see jsonQuery), any other body as "__wb_post_data=" and its base64, cut to maxPostQuery bytes and %-decoded as JavaScript's decodeURI does (the empty
// string when that fails). The second result is the body text before decoding, the CDXJ
// "requestBody" field.
func methodQuery(method, reqType string, body []byte) (string, string) {
	var text string
	switch {
	case reqType == "application/x-www-form-urlencoded":
		text = string(body)
	case reqType == "application/json" || reqType == "text/plain":
		text = jsonQuery(body)
	default:
		text = "__wb_post_data=" + base64.StdEncoding.EncodeToString(body)
	}
	if len(text) > maxPostQuery {
		text = text[:maxPostQuery]
	}
	// a blank or line break would end the CDXJ key early (a hostile form body can hold
	// them raw, or as %20 that decodeURI restores): they are percent-encoded again
	return "__wb_method=" + method + "&" + keyBlanks.Replace(decodeURI(text)), text
}

// keyBlanks percent-encodes the characters that cannot stand in a CDXJ key.
var keyBlanks = strings.NewReplacer(" ", "%20", "\t", "%09", "\n", "%0A", "\r", "%0D")

// jsonQuery flattens a JSON request body into form text as warcio.js does for
// application/json and text/plain bodies: every string, number, boolean or null value
// (empty strings left out) becomes "key=value", under the key of the object member that
// holds it (array items take their array's key; nested objects do not prefix their
// keys); a key already used becomes "key.2_", "key.3_", ...; members in JavaScript's
// property order (integer keys first, ascending, then the others in document order, a
// repeated key keeping its first place and its last value); numbers as JavaScript prints
// them; names and values encoded as application/x-www-form-urlencoded (WHATWG URL
// section 5.2). A body that is not JSON gives "".
func jsonQuery(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := readJSONValue(dec, 0)
	if err != nil {
		return ""
	}
	if _, err := dec.Token(); err != io.EOF {
		return ""
	}
	var pairs []string
	used := map[string]bool{}
	next := map[string]int{}
	var walk func(v jsValue, key string)
	walk = func(v jsValue, key string) {
		var text string
		switch v.kind {
		case 'o':
			for _, m := range v.members {
				walk(m.val, m.key)
			}
		case 'a':
			for _, it := range v.items {
				walk(it, key)
			}
		case 'n':
			text = "null"
		default:
			text = v.text
		}
		if text == "" {
			return
		}
		name := key
		if used[key] {
			if next[key] == 0 {
				next[key] = 1
			}
			next[key]++
			name = key + "." + strconv.Itoa(next[key]) + "_"
		}
		used[name] = true
		pairs = append(pairs, formEncode(name)+"="+formEncode(text))
	}
	walk(v, "")
	return strings.Join(pairs, "&")
}

// jsValue is a parsed JSON value: kind 'o' object, 'a' array, 'n' null, 's' a string,
// number or boolean as JavaScript's toString prints it (text).
type jsValue struct {
	kind    byte
	text    string
	members []jsMember
	items   []jsValue
}

type jsMember struct {
	key string
	val jsValue
}

// readJSONValue reads one value from dec, at most 64 levels deep.
func readJSONValue(dec *json.Decoder, depth int) (jsValue, error) {
	if depth > 64 {
		return jsValue{}, errors.New("too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return jsValue{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			v := jsValue{kind: 'a'}
			for dec.More() {
				it, err := readJSONValue(dec, depth+1)
				if err != nil {
					return jsValue{}, err
				}
				v.items = append(v.items, it)
			}
			_, err := dec.Token()
			return v, err
		}
		v := jsValue{kind: 'o'}
		at := map[string]int{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return jsValue{}, err
			}
			key, _ := kt.(string)
			val, err := readJSONValue(dec, depth+1)
			if err != nil {
				return jsValue{}, err
			}
			if i, ok := at[key]; ok {
				v.members[i].val = val
				continue
			}
			at[key] = len(v.members)
			v.members = append(v.members, jsMember{key, val})
		}
		if _, err := dec.Token(); err != nil {
			return jsValue{}, err
		}
		// JavaScript lists integer-like keys first, in ascending order.
		slices.SortStableFunc(v.members, func(a, b jsMember) int {
			ai, aok := arrayIndex(a.key)
			bi, bok := arrayIndex(b.key)
			switch {
			case aok && bok:
				return cmpUint(ai, bi)
			case aok:
				return -1
			case bok:
				return 1
			}
			return 0
		})
		return v, nil
	case nil:
		return jsValue{kind: 'n'}, nil
	case bool:
		return jsValue{kind: 's', text: strconv.FormatBool(t)}, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return jsValue{}, err
		}
		return jsValue{kind: 's', text: jsNumber(f)}, nil
	case string:
		return jsValue{kind: 's', text: t}, nil
	}
	return jsValue{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// arrayIndex reports whether k is a canonical array index ("0" to "4294967294").
func arrayIndex(k string) (uint64, bool) {
	if k == "" || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return n, true
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// jsNumber formats f as JavaScript's Number.prototype.toString (ECMA-262 section
// 6.1.6.1.20): the shortest digits that read back as f, plain from 1e-6 up to 1e21,
// otherwise with an exponent ("1e+21", "1.5e-7"); infinities as "Infinity".
func jsNumber(f float64) string {
	switch {
	case f == 0:
		return "0"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign := exp[:1]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + exp
}

// formEncode encodes s as the application/x-www-form-urlencoded serializer does: bytes
// other than ASCII letters, digits and *-._ as %XX (upper case), a space as "+".
func formEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("*-._", c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// decodeURI decodes %XX escapes as JavaScript's decodeURI (ECMA-262 section 19.2.6.5):
// escapes of the reserved characters ;/?:@&=+$,# stay as they are; a malformed escape or
// bytes that are not UTF-8 give "".
func decodeURI(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return ""
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return ""
		}
		if v < 0x80 && strings.IndexByte(";/?:@&=+$,#", byte(v)) >= 0 {
			out = append(out, s[i:i+3]...)
		} else {
			out = append(out, byte(v))
		}
		i += 2
	}
	if !utf8.Valid(out) {
		return ""
	}
	return string(out)
}

func appendQuery(u, q string) string {
	base, _, _ := strings.Cut(u, "#")
	if strings.Contains(base, "?") {
		return base + "&" + q
	}
	return base + "?" + q
}

// SURT returns the Sort-friendly URI Reordering Transform of an http or https URL as the
// CDXJ keys of warcio.js (and so ReplayWeb.page) make it: a leading "www." (or "www2." and
// the like) removed, then the whole URL lower-cased; scheme, user info and fragment dropped;
// the host's labels reversed and joined with commas, the port kept unless it is the
// scheme's default; then ")" and the path and the query, its parameters sorted.
// "https://www.Example.com/A?b=1&a=2" gives "com,example)/a?a=2&b=1". Another URL, or one
// that does not parse, is returned as it is.
func SURT(raw string) string {
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return raw
	}
	s := raw
	if i := strings.Index(s, "://"); strings.HasPrefix(s[i+3:], "www") {
		rest := s[i+6:]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j < len(rest) && rest[j] == '.' {
			s = s[:i+3] + rest[j+1:]
		}
	}
	u, err := url.Parse(strings.ToLower(s))
	if err != nil || u.Host == "" {
		return raw
	}
	labels := strings.Split(u.Hostname(), ".")
	slices.Reverse(labels)
	key := strings.Join(labels, ",")
	if p := u.Port(); p != "" && !(u.Scheme == "http" && p == "80") && !(u.Scheme == "https" && p == "443") {
		key += ":" + p
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	key += ")" + p
	if u.RawQuery != "" {
		params := strings.Split(queryEscape(u.RawQuery), "&")
		slices.Sort(params)
		key += "?" + strings.Join(params, "&")
	}
	return key
}

// queryEscape %-encodes the bytes of a raw query that the WHATWG URL parser encodes in
// the query of an http(s) URL (URL Standard section 1.3, special-query percent-encode set):
// controls, space, non-ASCII, and " # < > '. Escapes already there are kept.
func queryEscape(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte("\"#<>'", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// waczInput is one WARC member of a WACZ, opened for reading by the import.
type waczInput struct {
	name string // "FILE.wacz!archive/data.warc.gz", used in messages
	f    *zip.File
}

// openWACZ opens the WACZ at p and lists its WARC members: the files under archive/ whose
// names end in ".warc" or ".warc.gz", in name order. The WACZ is refused, with one line
// naming it, when it is not a ZIP, has more than MaxWACZMembers files, holds a member whose
// name is absolute or contains "..", a backslash or a control character, or that is a
// symlink or other non-regular file, holds a WARC member claiming more than
// MaxWACZMemberBytes, or holds no WARC member. Its pages.jsonl and indexes are not read: the import infers pages itself.
// The caller closes the returned zip.ReadCloser.
func openWACZ(p string) (*zip.ReadCloser, []waczInput, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("read %s: not a regular file", p)
	}
	zr, err := zip.OpenReader(p)
	if err != nil {
		if errors.Is(err, zip.ErrFormat) {
			return nil, nil, fmt.Errorf("read %s: not a WACZ: not a ZIP file (%v)", p, err)
		}
		return nil, nil, fmt.Errorf("read %s: %w", p, err)
	}
	ins, err := waczMembers(p, zr.File)
	if err != nil {
		_ = zr.Close()
		return nil, nil, err
	}
	return zr, ins, nil
}

// waczMembers checks the members of a WACZ at p and returns its WARC members (see openWACZ).
func waczMembers(p string, files []*zip.File) ([]waczInput, error) {
	if len(files) > MaxWACZMembers {
		return nil, fmt.Errorf("read %s: %d files in the ZIP, more than %d", p, len(files), MaxWACZMembers)
	}
	var ins []waczInput
	for _, f := range files {
		name := f.Name
		if err := checkMemberName(name); err != nil {
			return nil, fmt.Errorf("read %s: member %q: %w", p, name, err)
		}
		mode := f.Mode()
		if mode&fs.ModeSymlink != 0 || (!mode.IsRegular() && !mode.IsDir()) {
			return nil, fmt.Errorf("read %s: member %q: not a regular file (mode %s)", p, name, mode)
		}
		lower := strings.ToLower(name)
		if mode.IsDir() || !strings.HasPrefix(lower, "archive/") ||
			!(strings.HasSuffix(lower, ".warc") || strings.HasSuffix(lower, ".warc.gz")) {
			continue
		}
		if f.UncompressedSize64 > uint64(MaxWACZMemberBytes) {
			return nil, fmt.Errorf("read %s: member %q claims %d bytes, more than %d", p, name, f.UncompressedSize64, MaxWACZMemberBytes)
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, fmt.Errorf("read %s: member %q: unsupported ZIP compression method %d", p, name, f.Method)
		}
		ins = append(ins, waczInput{name: p + "!" + name, f: f})
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("read %s: not a WACZ: no archive/*.warc or archive/*.warc.gz member", p)
	}
	slices.SortStableFunc(ins, func(a, b waczInput) int { return strings.Compare(a.f.Name, b.f.Name) })
	for i := 1; i < len(ins); i++ {
		if ins[i].f.Name == ins[i-1].f.Name {
			return nil, fmt.Errorf("read %s: member %q occurs twice", p, ins[i].f.Name)
		}
	}
	return ins, nil
}

// checkMemberName refuses ZIP member names that could leave a folder when extracted.
func checkMemberName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return errors.New("name holds a backslash or a control character")
	case strings.HasPrefix(name, "/") || (len(name) > 1 && name[1] == ':'):
		return errors.New("absolute path")
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return errors.New("path leaves the archive (\"..\")")
		}
	}
	return nil
}

// open opens the member for the WARC reader: its uncompressed bytes, checked against the
// size and CRC-32 the ZIP claims.
func (in waczInput) open() (*Reader, error) {
	rc, err := in.f.Open()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", in.name, err)
	}
	r, err := newReader(in.name, rc, 0, int64(in.f.UncompressedSize64))
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	r.file = rc
	return r, nil
}

// VerifyWACZ checks the WACZ at p against its datapackage.json: every resource is a member
// whose size and sha256 match, and datapackage-digest.json, when present, holds the sha256
// of datapackage.json. It returns the package. Members are read in full, so this is for
// tests and checks, not for import.
func VerifyWACZ(p string) (*WACZPackage, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	defer zr.Close()
	byName := map[string]*zip.File{}
	for _, f := range zr.File {
		if err := checkMemberName(f.Name); err != nil {
			return nil, fmt.Errorf("read %s: member %q: %w", p, f.Name, err)
		}
		byName[f.Name] = f
	}
	read := func(name string, max int64) ([]byte, error) {
		f := byName[name]
		if f == nil {
			return nil, fmt.Errorf("read %s: no %s", p, name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, name, err)
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, max+1))
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, name, err)
		}
		if int64(len(data)) > max {
			return nil, fmt.Errorf("read %s!%s: larger than %d bytes", p, name, max)
		}
		return data, nil
	}
	pkgJSON, err := read(WACZPackageFile, MaxManifestBytes*16)
	if err != nil {
		return nil, err
	}
	var pkg WACZPackage
	if err := json.Unmarshal(pkgJSON, &pkg); err != nil {
		return nil, fmt.Errorf("read %s!%s: %w", p, WACZPackageFile, err)
	}
	if pkg.Profile != waczProfile {
		return nil, fmt.Errorf("read %s!%s: profile %q, want %q", p, WACZPackageFile, pkg.Profile, waczProfile)
	}
	if _, ok := byName[WACZDigestFile]; ok {
		digJSON, err := read(WACZDigestFile, MaxManifestBytes)
		if err != nil {
			return nil, err
		}
		var dig WACZDigest
		if err := json.Unmarshal(digJSON, &dig); err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, WACZDigestFile, err)
		}
		if want := "sha256:" + sha256Hex(pkgJSON); dig.Path != WACZPackageFile || dig.Hash != want {
			return nil, fmt.Errorf("read %s!%s: names %q %s, want %q %s", p, WACZDigestFile, dig.Path, dig.Hash, WACZPackageFile, want)
		}
	}
	for _, res := range pkg.Resources {
		f := byName[res.Path]
		if f == nil {
			return nil, fmt.Errorf("read %s!%s: resource %q is not in the ZIP", p, WACZPackageFile, res.Path)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, res.Path, err)
		}
		var h hash.Hash = sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s!%s: %w", p, res.Path, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != res.Hash || n != res.Bytes {
			return nil, fmt.Errorf("read %s!%s: %d bytes %s, datapackage.json says %d bytes %s", p, res.Path, n, got, res.Bytes, res.Hash)
		}
	}
	return &pkg, nil
}
