// CDXJ index lines (pywb's format) for the WACZ export, with the request-body query
// flattening of warcio.js (so ReplayWeb.page finds POST records) and SURT keys.

package recording

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pab-dev/pab/warc"
)

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
			rec, err := warc.ReadRecordAt(b.warc, filepath.Join(b.Dir, WARCFile), e.RespOffset, e.RespLength)
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
