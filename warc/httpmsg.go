// HTTP/1.x messages inside WARC records (WARC 1.1 section 6.3.2, application/http):
// HTTPMessage and ParseHTTP.

package warc

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/internal/textcut"
)

// HTTPMessage is an HTTP/1.x request or response parsed from a record block
// (WARC 1.1 section 6.3.2, application/http). The parser is lenient: malformed header
// lines are skipped with a warning on the record, header names are kept as recorded
// (also names that are not HTTP tokens, such as "Upgrade-Insecure Requests").
type HTTPMessage struct {
	// Method and RequestURI are set for requests ("GET", "/path?q").
	Method     string
	RequestURI string
	// StatusCode and Reason are set for responses (200, "OK").
	StatusCode int
	Reason     string
	// Proto is the version token of the first line, e.g. "HTTP/1.1".
	Proto string
	// Header holds the header fields in recording order; obs-fold continuation lines are
	// joined to their field with one space.
	Header Fields
	// Body is the message body exactly as stored in the block (it may still be chunked or
	// content-encoded; see DecodePayload). It is empty for a headers-only revisit.
	Body []byte
}

// IsRequest reports whether the message is a request.
func (m *HTTPMessage) IsRequest() bool { return m.Method != "" }

// Host returns the Host header as recorded (net/http would move it out of the header).
func (m *HTTPMessage) Host() string { return m.Header.Get("Host") }

// HTTPHeader returns the header as an http.Header (names canonicalised where they are
// valid tokens, every value kept in recording order).
func (m *HTTPMessage) HTTPHeader() http.Header {
	h := make(http.Header, len(m.Header))
	for _, f := range m.Header {
		h.Add(f.Name, f.Value)
	}
	return h
}

// ParseHTTP parses an HTTP/1.x message from a record block: the request line (request)
// or status line, header fields up to the first empty line (CRLF, bare LF or CR CR LF), and the
// body as stored. Malformed header lines are skipped and returned as warnings; an
// unreadable first line is an error.
func ParseHTTP(block []byte, request bool) (*HTTPMessage, []string, error) {
	var warns []string
	m := &HTTPMessage{}
	rest := block
	nextLine := func() ([]byte, bool) {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			line := rest
			rest = nil
			return line, false
		}
		line := rest[:i]
		rest = rest[i+1:]
		return bytes.TrimRight(line, "\r"), true // CRLF, LF or CR CR LF
	}
	first, _ := nextLine()
	parts := strings.Fields(string(first))
	if request {
		if len(parts) < 2 || !IsHTTPToken(parts[0]) {
			return nil, nil, fmt.Errorf("bad request line %q", ClipText(first))
		}
		m.Method = parts[0]
		m.Proto = "HTTP/1.0"
		target := parts[1:]
		if last := parts[len(parts)-1]; len(parts) >= 3 && strings.HasPrefix(last, "HTTP/") {
			m.Proto = last
			target = parts[1 : len(parts)-1]
		}
		m.RequestURI = strings.Join(target, "%20")
	} else {
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "HTTP/") {
			return nil, nil, fmt.Errorf("bad status line %q", ClipText(first))
		}
		code, err := strconv.Atoi(parts[1])
		if err != nil || len(parts[1]) != 3 || code < 100 {
			return nil, nil, fmt.Errorf("bad status code in %q", ClipText(first))
		}
		m.Proto, m.StatusCode = parts[0], code
		m.Reason = strings.Join(parts[2:], " ")
	}
	terminated := false
	for len(rest) > 0 {
		line, complete := nextLine()
		if len(line) == 0 && complete {
			terminated = true
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if n := len(m.Header); n > 0 {
				m.Header[n-1].Value = strings.TrimSpace(m.Header[n-1].Value + " " + strings.TrimSpace(string(line)))
				continue
			}
		}
		i := bytes.IndexByte(line, ':')
		name := ""
		if i > 0 {
			name = strings.TrimSpace(string(line[:i]))
		}
		if name == "" {
			warns = append(warns, fmt.Sprintf("HTTP header line %q skipped", ClipText(line)))
			continue
		}
		m.Header = append(m.Header, Field{Name: name, Value: strings.TrimSpace(string(line[i+1:]))})
	}
	if !terminated {
		warns = append(warns, "HTTP header is not ended by an empty line")
	}
	m.Body = rest
	return m, warns, nil
}

// ClipText is b for an error message: at most 80 bytes, cut on a character boundary.
func ClipText(b []byte) string { return textcut.Cut(string(b), 80, "...") }

func IsHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}
