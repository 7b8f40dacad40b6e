package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxLoggedBody is how much of a request body the request log keeps.
const MaxLoggedBody = 64 << 10

// LogEntry is one request the fixture received: one JSON line of `serve -log FILE`.
type LogEntry struct {
	// Time is when the request arrived, RFC 3339 UTC with nanoseconds.
	Time string `json:"time"`
	// Method is the request method as sent.
	Method string `json:"method"`
	// Host is the Host header (the fixture host the request was for, with any port).
	Host string `json:"host"`
	// URL is the full request URL: scheme, host and the request URI as sent.
	URL string `json:"url"`
	// Cookie is the Cookie header, all of them joined by "; " (empty: none).
	Cookie string `json:"cookie,omitempty"`
	// ContentType is the Content-Type header.
	ContentType string `json:"contentType,omitempty"`
	// Body is the first MaxLoggedBody bytes of the body (bytes that are not UTF-8 become
	// U+FFFD in the JSON).
	Body string `json:"body,omitempty"`
	// BodyTruncated says the body was longer than Body.
	BodyTruncated bool `json:"bodyTruncated,omitempty"`
}

// RequestLog records every request a handler receives, as JSON lines to a writer and,
// when asked, in memory (Entries). It is safe for concurrent handlers: each line is
// written whole, with one Write call, under a lock.
type RequestLog struct {
	mu      sync.Mutex
	w       io.Writer
	keep    bool
	entries []LogEntry
	err     error
	now     func() time.Time
}

// NewRequestLog returns a log writing JSON lines to w (nil: none) and, when keep is set,
// keeping every entry in memory for Entries (in-process tests).
func NewRequestLog(w io.Writer, keep bool) *RequestLog {
	return &RequestLog{w: w, keep: keep, now: time.Now}
}

// Wrap returns h with every request logged before h sees it. The body h reads is the
// whole body: the logged part is read first and put back in front of the rest.
func (l *RequestLog) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := LogEntry{Time: l.now().UTC().Format(time.RFC3339Nano), Method: r.Method, Host: r.Host,
			ContentType: r.Header.Get("Content-Type")}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		switch uri := r.RequestURI; {
		case strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://"):
			e.URL = uri // absolute form, as a proxy is sent
		case uri == "":
			e.URL = scheme + "://" + r.Host + r.URL.RequestURI()
		default:
			e.URL = scheme + "://" + r.Host + uri
		}
		if cs := r.Header.Values("Cookie"); len(cs) > 0 {
			e.Cookie = joinCookies(cs)
		}
		if r.Body != nil && r.Body != http.NoBody {
			head, err := io.ReadAll(io.LimitReader(r.Body, MaxLoggedBody+1))
			if len(head) > MaxLoggedBody {
				e.Body, e.BodyTruncated = string(head[:MaxLoggedBody]), true
			} else {
				e.Body = string(head)
			}
			var rest io.Reader = r.Body
			if err != nil {
				rest = &errReader{err}
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), rest), r.Body}
		}
		l.add(e)
		h.ServeHTTP(w, r)
	})
}

func joinCookies(cs []string) string {
	var b bytes.Buffer
	for i, c := range cs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c)
	}
	return b.String()
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

func (l *RequestLog) add(e LogEntry) {
	line, err := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keep {
		l.entries = append(l.entries, e)
	}
	if l.w == nil || l.err != nil {
		return
	}
	if err != nil {
		l.err = fmt.Errorf("applyfixture: request log: %w", err)
		return
	}
	if _, err := l.w.Write(append(line, '\n')); err != nil {
		l.err = fmt.Errorf("applyfixture: request log: %w", err)
	}
}

// Entries returns a copy of the requests logged so far, in the order they were logged
// (a request is logged once its logged part of the body is read); nil unless the log
// keeps entries.
func (l *RequestLog) Entries() []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LogEntry(nil), l.entries...)
}

// Err is the first error writing the log met (later lines are then kept in memory only).
func (l *RequestLog) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}
