// Package har reads and writes HTTP Archive files, HAR 1.2 (the W3C draft "HTTP Archive
// (HAR) format", https://w3c.github.io/web-performance/specs/HAR/Overview.html, and the
// 1.2 spec at http://www.softwareishard.com/blog/har-12-spec/), as Chrome DevTools,
// Playwright (recordHar, including its .zip form with attached body files) and mitmproxy
// write them.
//
// The format alone lives here: Reader streams a HAR's entries one at a time with every
// size bounded (a HAR may be hostile), OpenZip opens Playwright's .zip HAR, Writer writes
// one. Turning entries into a recording is the importer's business (importer/har.go),
// turning a recording into a HAR cmd/pab's export; this package imports nothing of pab's.
package har

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Log is the HAR's "log" object without its entries, which Reader streams: version,
// creator, browser and pages (HAR 1.2 "log"). Fields that follow the entries in the file
// are only known once Reader.Next has returned io.EOF.
type Log struct {
	// Version is the format version ("1.2"; "" when the file says none).
	Version string `json:"version"`
	// Creator and Browser name the program that wrote the file and the browser it watched.
	Creator Creator  `json:"creator"`
	Browser *Creator `json:"browser,omitempty"`
	// Pages are the top-level pages of the capture (may be empty).
	Pages   []Page `json:"pages,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// Creator is HAR's "creator" and "browser" object: a program's name and version.
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Comment string `json:"comment,omitempty"`
}

// Page is one HAR page: its start time (ISO 8601), id (what entries name in pageref),
// title and timings in milliseconds (-1: not known).
type Page struct {
	StartedDateTime string      `json:"startedDateTime"`
	ID              string      `json:"id"`
	Title           string      `json:"title"`
	PageTimings     PageTimings `json:"pageTimings"`
	Comment         string      `json:"comment,omitempty"`
}

// PageTimings are a page's onContentLoad and onLoad times in milliseconds since its start,
// -1 when not known.
type PageTimings struct {
	OnContentLoad *float64 `json:"onContentLoad,omitempty"`
	OnLoad        *float64 `json:"onLoad,omitempty"`
}

// Entry is one HAR entry: an HTTP request and its response. Index is the entry's place in
// the file's "entries" array, from 0, as every error names it.
type Entry struct {
	Index           int      `json:"-"`
	Pageref         string   `json:"pageref,omitempty"`
	StartedDateTime string   `json:"startedDateTime"`
	Time            float64  `json:"time"`
	Request         Request  `json:"request"`
	Response        Response `json:"response"`
	Cache           struct{} `json:"cache"`
	Timings         Timings  `json:"timings"`
	ServerIPAddress string   `json:"serverIPAddress,omitempty"`
	Connection      string   `json:"connection,omitempty"`
	Comment         string   `json:"comment,omitempty"`
	// ResourceType is Chrome DevTools' "_resourceType" ("document", "script", ...).
	ResourceType string `json:"_resourceType,omitempty"`
	// Pab is pab's own "_pab" field of an exported run: where replay's answer came from.
	Pab *PabInfo `json:"_pab,omitempty"`

	hasRequest, hasResponse bool
}

// PabInfo is the "_pab" field pab writes on each entry of a HAR it exports: for a run, the
// lookup step that answered (Source: "exact", "search", "promo", "fuzzy", "blocked",
// "miss", ...), the recorded exchange (Entry, "e000123") and replay's note; for a
// recording, the exchange id alone.
type PabInfo struct {
	Source string `json:"source,omitempty"`
	Entry  string `json:"entry,omitempty"`
	Note   string `json:"note,omitempty"`
	// BodyNotCaptured marks a response whose body the capture left out.
	BodyNotCaptured bool `json:"bodyNotCaptured,omitempty"`
	// RequestBodyFromRecording marks a run's request whose body (postData) is the
	// recorded request's that answered it exactly (the same matching key), because the
	// replay log keeps no request bodies: not necessarily the bytes the agent sent.
	RequestBodyFromRecording bool `json:"requestBodyFromRecording,omitempty"`
}

// Started is the entry's startedDateTime as a time (ISO 8601 / RFC 3339, any offset); the
// zero time and an error when it is missing or malformed.
func (e *Entry) Started() (time.Time, error) {
	return ParseTime(e.StartedDateTime)
}

// ParseTime parses a HAR date (ISO 8601 as RFC 3339, with or without fractional seconds).
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("startedDateTime %q is not an ISO 8601 date such as 2026-12-06T06:30:00.000Z", cut(s))
	}
	return t, nil
}

// Request is HAR's "request" object. BodySize is in bytes, -1 when not known.
type Request struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []Header    `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	PostData    *PostData   `json:"postData,omitempty"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// Response is HAR's "response" object. BodySize is in bytes as transferred, -1 when not
// known; TransferSize is Chrome DevTools' "_transferSize" (bytes on the wire, head
// included), 0 when absent.
type Response struct {
	Status       int      `json:"status"`
	StatusText   string   `json:"statusText"`
	HTTPVersion  string   `json:"httpVersion"`
	Cookies      []Cookie `json:"cookies"`
	Headers      []Header `json:"headers"`
	Content      Content  `json:"content"`
	RedirectURL  string   `json:"redirectURL"`
	HeadersSize  int64    `json:"headersSize"`
	BodySize     int64    `json:"bodySize"`
	TransferSize int64    `json:"_transferSize,omitempty"`
	Comment      string   `json:"comment,omitempty"`
}

// Header is one header field (HAR "headers" item); names keep the file's spelling.
type Header struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Comment string `json:"comment,omitempty"`
}

// NameValue is a query string parameter or a posted parameter (HAR "queryString" and
// "params" items; FileName and ContentType only for posted files).
type NameValue struct {
	Name        string `json:"name"`
	Value       string `json:"value,omitempty"`
	FileName    string `json:"fileName,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Comment     string `json:"comment,omitempty"`
}

// Cookie is HAR's cookie object; pab strips cookies, so only names and values are read.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Path     string `json:"path,omitempty"`
	Domain   string `json:"domain,omitempty"`
	Expires  string `json:"expires,omitempty"`
	HTTPOnly bool   `json:"httpOnly,omitempty"`
	Secure   bool   `json:"secure,omitempty"`
}

// PostData is HAR's "postData": the request body as text (Encoding "base64" when it is
// base64, a non-standard field some writers add), or its params, or a Playwright attached
// file (File, "_file").
type PostData struct {
	MimeType string      `json:"mimeType"`
	Params   []NameValue `json:"params,omitempty"`
	Text     string      `json:"text"`
	Encoding string      `json:"_encoding,omitempty"`
	File     string      `json:"_file,omitempty"`
	Comment  string      `json:"comment,omitempty"`
}

// Content is HAR's "content": the response body as the browser decoded it (Size in bytes,
// -1 when unknown), as text or base64 (Encoding "base64"), or in a file attached beside the
// HAR (File, Playwright's "_file"). Compression is the bytes saved by the content coding.
type Content struct {
	Size        int64  `json:"size"`
	Compression int64  `json:"compression,omitempty"`
	MimeType    string `json:"mimeType"`
	Text        string `json:"text,omitempty"`
	Encoding    string `json:"encoding,omitempty"`
	File        string `json:"_file,omitempty"`
	Comment     string `json:"comment,omitempty"`

	hasText bool
}

// UnmarshalJSON reads HAR's "content" and notes whether it had a "text" field.
func (c *Content) UnmarshalJSON(b []byte) error {
	type plain Content
	var aux struct {
		plain
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = Content(aux.plain)
	if aux.Text != nil {
		c.Text, c.hasText = *aux.Text, true
	}
	return nil
}

// MarshalJSON writes HAR's "content", with its "text" whenever the body was captured (an
// empty text included).
func (c Content) MarshalJSON() ([]byte, error) {
	type plain Content
	aux := struct {
		plain
		Text *string `json:"text,omitempty"`
	}{plain: plain(c)}
	if c.hasText || c.Text != "" {
		aux.Text = &c.Text
	}
	return json.Marshal(aux)
}

// SetBody stores body as the content's text: as is when it is valid UTF-8 and the media
// type is textual, else base64 (Encoding "base64"). Size becomes its length.
func (c *Content) SetBody(body []byte) {
	c.Size = int64(len(body))
	c.hasText = true
	if utf8.Valid(body) && textual(c.MimeType) {
		c.Text, c.Encoding = string(body), ""
		return
	}
	c.Text, c.Encoding = base64.StdEncoding.EncodeToString(body), "base64"
}

// textual says whether a media type's bodies are text a HAR may hold as is.
func textual(mime string) bool {
	m := strings.ToLower(mime)
	if i := strings.IndexByte(m, ';'); i >= 0 {
		m = m[:i]
	}
	m = strings.TrimSpace(m)
	return strings.HasPrefix(m, "text/") || strings.HasSuffix(m, "+json") || strings.HasSuffix(m, "+xml") ||
		m == "application/json" || m == "application/javascript" || m == "application/xml" ||
		m == "application/x-www-form-urlencoded" || m == "image/svg+xml"
}

// HasText says whether the file had a "text" field for the body (an empty text is a body
// of 0 bytes; no text at all is a body the capture left out, see BodyNotCaptured).
func (c *Content) HasText() bool { return c.hasText }

// Timings are HAR's phase timings of an entry in milliseconds, -1 when a phase does not
// apply; Send, Wait and Receive are required.
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

// Body returns the decoded bytes of c.Text (base64 when Encoding says so, UTF-8 text
// otherwise). An error names what is wrong with the encoding.
func (c *Content) Body() ([]byte, error) {
	return decodeText(c.Text, c.Encoding)
}

// Body returns the request body of p: Text (base64 when Encoding says so), else Params
// encoded as a form when the media type is application/x-www-form-urlencoded; nil when p
// holds neither.
func (p *PostData) Body() ([]byte, error) {
	if p.Text != "" || len(p.Params) == 0 {
		return decodeText(p.Text, p.Encoding)
	}
	if !strings.HasPrefix(strings.ToLower(p.MimeType), "application/x-www-form-urlencoded") {
		return nil, nil
	}
	var sb strings.Builder
	for i, v := range p.Params {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(formEscape(v.Name))
		sb.WriteByte('=')
		sb.WriteString(formEscape(v.Value))
	}
	return []byte(sb.String()), nil
}

func decodeText(text, enc string) ([]byte, error) {
	switch strings.ToLower(enc) {
	case "":
		return []byte(text), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			// some writers drop the padding
			if b2, err2 := base64.RawStdEncoding.DecodeString(strings.TrimRight(text, "=")); err2 == nil {
				return b2, nil
			}
			return nil, fmt.Errorf("text is not valid base64: %v", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("encoding %q is not one HAR knows (base64, or none for text)", cut(enc))
	}
}

// formEscape escapes s as application/x-www-form-urlencoded does (HTML "URL-encoded form
// data"): space as +, unreserved bytes as themselves, the rest %XX.
func formEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ':
			sb.WriteByte('+')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '*':
			sb.WriteByte(c)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&15])
		}
	}
	return sb.String()
}

// cut shortens s for an error message.
func cut(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// QueryString lists the query parameters of rawURL in their order, unescaped where they
// unescape (HAR "queryString"); an empty list for a URL without a query.
func QueryString(rawURL string) []NameValue {
	out := []NameValue{}
	_, q, ok := strings.Cut(rawURL, "?")
	if !ok {
		return out
	}
	q, _, _ = strings.Cut(q, "#")
	for _, kv := range strings.Split(q, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.QueryUnescape(v); err == nil {
			v = uv
		}
		out = append(out, NameValue{Name: k, Value: v})
	}
	return out
}
