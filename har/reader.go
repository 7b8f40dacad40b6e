package har

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds of a HAR read (Limits' zero fields take these).
const (
	// DefaultMaxText bounds one JSON string of a HAR in bytes as written in the file (so a
	// body's "text", base64 or not): 128 MiB. encoding/json holds the whole entry in its
	// buffer and the string once decoded, so an entry costs about four times its largest
	// text in memory: this bounds that.
	DefaultMaxText = 128 << 20
	// DefaultMaxEntries bounds the entries of one HAR: 1,000,000.
	DefaultMaxEntries = 1_000_000
	// DefaultMaxPages bounds the pages of one HAR: 100,000.
	DefaultMaxPages = 100_000
	// DefaultMaxDepth bounds how deeply arrays and objects nest (a HAR needs 6).
	DefaultMaxDepth = 64
	// DefaultMaxEntryBytes bounds the JSON of one entry outside its strings' bound: 512 MiB.
	DefaultMaxEntryBytes = 512 << 20
)

// Limits bound what a Reader accepts; a zero field takes its Default.
type Limits struct {
	MaxText    int64
	MaxEntries int
	MaxPages   int
	MaxDepth   int
}

func (l Limits) withDefaults() Limits {
	if l.MaxText <= 0 {
		l.MaxText = DefaultMaxText
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultMaxPages
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Reader streams a HAR file: the "log" object's fields as they come, its entries one at a
// time through Next, never the whole file in memory (a token stream of encoding/json; each
// entry is decoded alone, its strings bounded by Limits.MaxText while they are read).
type Reader struct {
	dec   *json.Decoder
	guard *guard
	lim   Limits
	// Log holds the log's fields read so far (all of them once Next returned io.EOF).
	Log Log
	// state: 0 before the entries, 1 inside the entries array, 2 after it
	state   int
	next    int // index of the next entry
	sawLog  bool
	sawEnts bool
	err     error
}

// Error is a HAR that cannot be read: Entry is the index of the entry it concerns (-1 when
// none), Field the JSON field ("log.entries[3].request.url"), Msg what was expected.
type Error struct {
	Entry int
	Field string
	Msg   string
	Err   error
}

func (e *Error) Error() string {
	var sb strings.Builder
	if e.Entry >= 0 {
		fmt.Fprintf(&sb, "entry %d: ", e.Entry)
	}
	if e.Field != "" {
		sb.WriteString(e.Field + ": ")
	}
	sb.WriteString(e.Msg)
	return sb.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTooLarge is wrapped by the errors of a string, entry count or nesting past Limits.
var ErrTooLarge = errors.New("too large")

// NewReader starts reading a HAR from r with limits lim (zero fields: defaults). It reads
// up to the "entries" array (or the end), so that Log's fields before it are known; an
// error says what is not a HAR.
func NewReader(r io.Reader, lim Limits) (*Reader, error) {
	lim = lim.withDefaults()
	g := &guard{r: bufio.NewReaderSize(r, 64<<10), maxString: lim.MaxText, maxDepth: lim.MaxDepth}
	hr := &Reader{dec: json.NewDecoder(g), guard: g, lim: lim}
	hr.dec.UseNumber()
	if err := hr.start(); err != nil {
		hr.err = err
		return nil, err
	}
	return hr, nil
}

// Sniff says whether the start of a file (its first bytes, 512 or so) looks like a HAR: a
// JSON object (after an optional UTF-8 byte order mark and white space) whose first key is
// "log". A HAR whose "log" is not its first key is not recognised by Sniff.
func Sniff(head []byte) bool {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	head = bytes.TrimLeft(head[1:], " \t\r\n")
	return bytes.HasPrefix(head, []byte(`"log"`))
}

func (hr *Reader) fail(entry int, field, msg string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "the file ends here (truncated JSON)"
	} else if ge := (*guardError)(nil); errors.As(err, &ge) {
		msg = ge.msg
		err = ge
	} else if err != nil && msg == "" {
		msg = "malformed JSON: " + err.Error()
	}
	return &Error{Entry: entry, Field: field, Msg: msg, Err: err}
}

// start reads "{", finds "log" and reads its fields up to "entries".
func (hr *Reader) start() error {
	if err := hr.expectDelim('{', "", "a JSON object (a HAR file starts with {\"log\": ...})"); err != nil {
		return err
	}
	for hr.dec.More() {
		key, err := hr.key("")
		if err != nil {
			return err
		}
		if key != "log" {
			if err := hr.skip("", -1); err != nil {
				return err
			}
			continue
		}
		hr.sawLog = true
		if err := hr.expectDelim('{', "log", "an object"); err != nil {
			return err
		}
		return hr.logFields()
	}
	return &Error{Entry: -1, Msg: `no "log" object: not a HAR file`}
}

// logFields reads the log's fields until the entries array opens (state 1) or the log ends
// (state 2).
func (hr *Reader) logFields() error {
	for hr.dec.More() {
		key, err := hr.key("log")
		if err != nil {
			return err
		}
		field := "log." + key
		switch key {
		case "version":
			err = hr.decode(-1, field, &hr.Log.Version)
		case "creator":
			err = hr.decode(-1, field, &hr.Log.Creator)
		case "browser":
			hr.Log.Browser = &Creator{}
			err = hr.decode(-1, field, hr.Log.Browser)
		case "comment":
			err = hr.decode(-1, field, &hr.Log.Comment)
		case "pages":
			err = hr.pages()
		case "entries":
			if hr.sawEnts {
				return &Error{Entry: -1, Field: field, Msg: "a second entries array"}
			}
			hr.sawEnts = true
			if err := hr.expectDelim('[', field, "an array"); err != nil {
				return err
			}
			hr.state = 1
			return nil
		default:
			err = hr.skip(field, -1)
		}
		if err != nil {
			return err
		}
	}
	// the log's closing brace
	if _, err := hr.dec.Token(); err != nil {
		return hr.fail(-1, "log", "", err)
	}
	hr.state = 2
	return nil
}

func (hr *Reader) pages() error {
	if err := hr.expectDelim('[', "log.pages", "an array"); err != nil {
		return err
	}
	for hr.dec.More() {
		if len(hr.Log.Pages) >= hr.lim.MaxPages {
			return &Error{Entry: -1, Field: "log.pages", Msg: fmt.Sprintf("more than %d pages", hr.lim.MaxPages), Err: ErrTooLarge}
		}
		var p Page
		if err := hr.decode(-1, fmt.Sprintf("log.pages[%d]", len(hr.Log.Pages)), &p); err != nil {
			return err
		}
		hr.Log.Pages = append(hr.Log.Pages, p)
	}
	_, err := hr.dec.Token()
	if err != nil {
		return hr.fail(-1, "log.pages", "", err)
	}
	return nil
}

// Next returns the next entry, checked for the fields pab needs (request with method and
// URL, response with a status from 100 to 999, a startedDateTime), or io.EOF after the
// last one once the file has ended properly. An error names the entry's index; after an
// error Next returns it again.
func (hr *Reader) Next() (*Entry, error) {
	if hr.err != nil {
		return nil, hr.err
	}
	e, err := hr.next1()
	if err != nil {
		hr.err = err
	}
	return e, err
}

func (hr *Reader) next1() (*Entry, error) {
	for hr.state == 1 {
		if hr.dec.More() {
			break
		}
		if _, err := hr.dec.Token(); err != nil { // ]
			return nil, hr.fail(hr.next, "log.entries", "", err)
		}
		hr.state = 0
		if err := hr.logFields(); err != nil {
			return nil, err
		}
	}
	if hr.state != 1 {
		if err := hr.finish(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	i := hr.next
	if i >= hr.lim.MaxEntries {
		return nil, &Error{Entry: i, Field: "log.entries", Msg: fmt.Sprintf("more than %d entries", hr.lim.MaxEntries), Err: ErrTooLarge}
	}
	hr.next++
	var raw struct {
		Entry
		Request  *Request  `json:"request"`
		Response *Response `json:"response"`
	}
	if err := hr.decode(i, "", &raw); err != nil {
		return nil, err
	}
	e := raw.Entry
	e.Index = i
	switch {
	case raw.Request == nil:
		return nil, &Error{Entry: i, Field: "request", Msg: "missing (every HAR entry has a request object)"}
	case raw.Response == nil:
		return nil, &Error{Entry: i, Field: "response", Msg: "missing (every HAR entry has a response object)"}
	}
	e.Request, e.Response = *raw.Request, *raw.Response
	e.hasRequest, e.hasResponse = true, true
	switch {
	case e.Request.Method == "":
		return nil, &Error{Entry: i, Field: "request.method", Msg: "missing or empty"}
	case e.Request.URL == "":
		return nil, &Error{Entry: i, Field: "request.url", Msg: "missing or empty"}
	case e.Response.Status < 0 || e.Response.Status > 999:
		return nil, &Error{Entry: i, Field: "response.status", Msg: fmt.Sprintf("%d is not an HTTP status (0 for none, 100 to 999)", e.Response.Status)}
	}
	if _, err := e.Started(); err != nil {
		return nil, &Error{Entry: i, Field: "startedDateTime", Msg: err.Error()}
	}
	return &e, nil
}

// finish reads what follows the log up to the end of the top-level object and checks that
// nothing but white space follows it.
func (hr *Reader) finish() error {
	if hr.state == 3 {
		return nil
	}
	for hr.dec.More() {
		key, err := hr.key("")
		if err != nil {
			return err
		}
		if key == "log" {
			return &Error{Entry: -1, Field: "log", Msg: "a second log object"}
		}
		if err := hr.skip(key, -1); err != nil {
			return err
		}
	}
	if _, err := hr.dec.Token(); err != nil {
		return hr.fail(-1, "", "", err)
	}
	if _, err := hr.dec.Token(); err != io.EOF {
		return &Error{Entry: -1, Msg: "data after the HAR's top-level object"}
	}
	if !hr.sawEnts {
		return &Error{Entry: -1, Field: "log.entries", Msg: "missing (a HAR log has an entries array)"}
	}
	hr.state = 3
	return nil
}

// decode decodes the next value into v, naming entry and field in an error.
func (hr *Reader) decode(entry int, field string, v any) error {
	if err := hr.dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			f := te.Field
			if field != "" && f != "" {
				f = field + "." + f
			} else if f == "" {
				f = field
			}
			return &Error{Entry: entry, Field: f, Msg: fmt.Sprintf("a JSON %s where a %s was expected", te.Value, te.Type), Err: err}
		}
		return hr.fail(entry, field, "", err)
	}
	return nil
}

func (hr *Reader) expectDelim(want json.Delim, field, what string) error {
	tok, err := hr.dec.Token()
	if err != nil {
		return hr.fail(-1, field, "", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return &Error{Entry: -1, Field: field, Msg: fmt.Sprintf("%v where %s was expected", describe(tok), what)}
	}
	return nil
}

func (hr *Reader) key(field string) (string, error) {
	tok, err := hr.dec.Token()
	if err != nil {
		return "", hr.fail(-1, field, "", err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", &Error{Entry: -1, Field: field, Msg: fmt.Sprintf("%v where a key was expected", describe(tok))}
	}
	return s, nil
}

// skip reads past the next value token by token, holding none of it.
func (hr *Reader) skip(field string, entry int) error {
	depth := 0
	for {
		tok, err := hr.dec.Token()
		if err != nil {
			return hr.fail(entry, field, "", err)
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return fmt.Sprintf("the string %q", cut(t))
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%v", t)
	}
}

// guard watches the bytes that go into the JSON decoder: it refuses a string longer than
// maxString bytes and arrays and objects nested deeper than maxDepth before the decoder
// would buffer them, since encoding/json holds a whole string token in memory.
type guard struct {
	r         io.Reader
	maxString int64
	maxDepth  int
	inString  bool
	esc       bool
	strLen    int64
	depth     int
	err       error
}

type guardError struct{ msg string }

func (e *guardError) Error() string { return e.msg }
func (e *guardError) Unwrap() error { return ErrTooLarge }

func (g *guard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	for i := 0; i < n; i++ {
		c := p[i]
		if g.inString {
			g.strLen++
			switch {
			case g.esc:
				g.esc = false
			case c == '\\':
				g.esc = true
			case c == '"':
				g.inString = false
			}
			if g.strLen > g.maxString {
				g.err = &guardError{fmt.Sprintf("a JSON string longer than %d bytes (a body's text past the import's bound)", g.maxString)}
				return i, g.err
			}
			continue
		}
		switch c {
		case '"':
			g.inString, g.strLen = true, 0
		case '{', '[':
			g.depth++
			if g.depth > g.maxDepth {
				g.err = &guardError{fmt.Sprintf("arrays and objects nested deeper than %d levels", g.maxDepth)}
				return i, g.err
			}
		case '}', ']':
			g.depth--
		}
	}
	return n, err
}
