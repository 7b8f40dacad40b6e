package recording

// entryjson.go: an entries.jsonl line written without reflection. An import writes each
// entry twice (the bundle's entries.jsonl and the pack's entries.jsonl.gz), a million
// lines apiece at 10^6 exchanges, and encoding/json spent about 4.7 µs on each.

import (
	"strconv"
)

// appendEntryJSON appends e's line, exactly as encoding/json writes it with
// SetEscapeHTML(false) (the fields in Entry's order, its omitempty rules, a newline at the
// end), and reports true, when every string of e is plain: printable ASCII (0x20 to 0x7e)
// with no '"' or '\'. Otherwise it returns b as it was and false, and the line is left to
// encoding/json (TestEntryJSONSameBytes, FuzzEntryJSON).
func appendEntryJSON(b []byte, e *Entry) ([]byte, bool) {
	for _, s := range [...]string{e.ID, e.TS, e.Method, e.URL, e.Mime, e.Digest, e.ReqBody, e.ReqType, e.RevisitOf, e.ResourceType} {
		if !plainJSON(s) {
			return b, false
		}
	}
	str := func(name, v string) {
		b = append(b, ",\""...)
		b = append(b, name...)
		b = append(b, "\":\""...)
		b = append(b, v...)
		b = append(b, '"')
	}
	num := func(name string, v int64) {
		b = append(b, ",\""...)
		b = append(b, name...)
		b = append(b, "\":"...)
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, "{\"id\":\""...)
	b = append(b, e.ID...)
	b = append(b, '"')
	str("ts", e.TS)
	str("method", e.Method)
	str("url", e.URL)
	num("status", int64(e.Status))
	if e.Mime != "" {
		str("mime", e.Mime)
	}
	if e.Digest != "" {
		str("digest", e.Digest)
	}
	num("size", e.Size)
	num("reqOffset", e.ReqOffset)
	num("reqLength", e.ReqLength)
	num("respOffset", e.RespOffset)
	num("respLength", e.RespLength)
	if e.ReqBody != "" {
		str("reqBody", e.ReqBody)
	}
	if e.ReqType != "" {
		str("reqType", e.ReqType)
	}
	if e.RevisitOf != "" {
		str("revisitOf", e.RevisitOf)
	}
	if e.Unresolved {
		b = append(b, ",\"unresolved\":true"...)
	}
	if e.ResourceType != "" {
		str("type", e.ResourceType)
	}
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"respPart", int64(e.RespPart)}, {"respGzOffset", e.RespGzOffset}, {"respGzLength", e.RespGzLength},
		{"reqPart", int64(e.ReqPart)}, {"reqGzOffset", e.ReqGzOffset}, {"reqGzLength", e.ReqGzLength}} {
		if f.v != 0 {
			num(f.name, f.v)
		}
	}
	return append(b, "}\n"...), true
}

// plainJSON reports whether encoding/json writes s as it is between its quotes: printable
// ASCII with no '"' or '\' (with SetEscapeHTML(false), '<', '>' and '&' stay as they are).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
