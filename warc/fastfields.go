// The WARC header fields of a record of another tool, in the common shape, without gowarc's
// allocations (Reader.readHeader); anything else goes to gowarc as before.

package warc

import (
	"bytes"
	"strings"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// maxFieldNames bounds the field names a Reader remembers in their canonical form.
const maxFieldNames = 256

// fastFields parses hdr, a record's WARC header as readHeader collects it (the version
// line, the field lines, the blank line), as gowarc (with validation off) does, when every
// field line is the plain shape: not starting with a blank (no folded continuation), ended
// by CRLF, with a colon, without an RFC 2047 encoded word ("=?"), and every digest field
// names an algorithm gowarc knows. ok is false for any other header: gowarc reads it then,
// so what a header gives (names canonicalized by gowarc itself, values, errors) is the same
// either way. The values share one string of the header; names come from r.names.
func (r *Reader) fastFields(hdr []byte) (fields Fields, ok bool) {
	if bytes.Contains(hdr, []byte("=?")) || !bytes.HasSuffix(hdr, []byte("\r\n\r\n")) {
		return nil, false
	}
	nl := bytes.IndexByte(hdr, '\n')
	body := hdr[nl+1 : len(hdr)-2] // the field lines, each ended by CRLF
	if len(body) == 1 || (len(body) > 0 && body[len(body)-2] != '\r') {
		return nil, false
	}
	n := bytes.Count(body, []byte("\r\n"))
	if n != bytes.Count(body, []byte("\n")) {
		return nil, false // a line ended by LF alone
	}
	s := string(body)
	fields = make(Fields, 0, n)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		line := s[:i-1]
		s = s[i+1:]
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' || line[0] == '\r' {
			return nil, false
		}
		line = strings.TrimRight(line, " \t\r\n")
		colon := strings.IndexByte(line, ':')
		if colon < 0 {
			return nil, false
		}
		name, ok := r.canonicalName(trimField(line[:colon]))
		if !ok {
			return nil, false
		}
		fields = append(fields, Field{Name: name, Value: trimField(line[colon+1:])})
	}
	for _, f := range fields {
		if f.Name == gowarc.WarcBlockDigest || f.Name == gowarc.WarcPayloadDigest {
			algorithm, _, _ := strings.Cut(f.Value, ":")
			switch strings.ToLower(algorithm) {
			case "md5", "sha1", "sha-1", "sha256", "sha-256", "sha512", "sha-512", "":
			default:
				return nil, false // gowarc refuses it: its error, not another
			}
		}
	}
	return fields, true
}

// trimField trims what gowarc trims from a field's name and value: spaces, tabs, CR, LF.
func trimField(s string) string {
	return strings.Trim(s, " \t\r\n")
}

// canonicalName is name as gowarc stores it (its own table of WARC names, else
// http.CanonicalHeaderKey), remembered per Reader for up to maxFieldNames names; false
// for a name not remembered once the table is full.
func (r *Reader) canonicalName(name string) (string, bool) {
	if c, ok := r.names[name]; ok {
		return c, true
	}
	if len(r.names) >= maxFieldNames {
		return "", false
	}
	var wf gowarc.WarcFields
	wf.Add(name, "")
	if len(wf) != 1 {
		return "", false
	}
	if r.names == nil {
		r.names = map[string]string{}
	}
	c := wf[0].Name
	r.names[strings.Clone(name)] = c
	return c, true
}
