// Package wholebodytest forces, in tests, the timing that package wholebody guards
// against: a client transport that reads the end of a request's body late, after the
// proxy in front of it has begun to pass the answer on (golang/go#40747).
package wholebodytest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// LateEndTransport returns a transport that sends each request through next with its body
// held at its end: once the body has given its Content-Length bytes, the transport's next
// read of it (the read that sees the body's end) waits until wait is closed (at most a
// minute), and after is closed once the first such read is done. A test closes wait when
// its client has the first part of an answer and has the upstream send the rest on after:
// the late read then comes after the proxy began to answer, as on a loaded machine.
func LateEndTransport(next http.RoundTripper, wait <-chan struct{}, after chan struct{}) http.RoundTripper {
	var once sync.Once
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil && r.Body != http.NoBody {
			r = r.Clone(r.Context())
			r.Body = &lateEnd{ReadCloser: r.Body, left: r.ContentLength, wait: wait, after: after, once: &once}
		}
		return next.RoundTrip(r)
	})
}

// lateEnd is a request body whose reader, once it has given left bytes, waits for wait
// before reading on (to see the body's end), then closes after: the transport's writer
// descheduled, on a loaded machine, between the body and its check that the body has no
// more than its Content-Length.
type lateEnd struct {
	io.ReadCloser
	left  int64
	wait  <-chan struct{}
	after chan struct{}
	once  *sync.Once
}

func (l *lateEnd) Read(p []byte) (int, error) {
	if l.left <= 0 {
		select {
		case <-l.wait:
		case <-time.After(time.Minute):
		}
		defer l.once.Do(func() { close(l.after) })
		return l.ReadCloser.Read(p)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.ReadCloser.Read(p)
	l.left -= int64(n)
	return n, err
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ReadInTwoParts reads an answer's stream from body: up to the first point where what was
// read holds first, then closes seen (the client has the first part: LateEndTransport's
// wait), then the rest to its end. It returns all that was read, and the error that ended
// the read when it was not the stream's end.
func ReadInTwoParts(body io.Reader, first string, seen chan<- struct{}) (string, error) {
	br := bufio.NewReader(body)
	var got strings.Builder
	for !strings.Contains(got.String(), first) {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			return got.String(), fmt.Errorf("before the first part's end: %w", err)
		}
	}
	close(seen)
	rest, err := io.ReadAll(br)
	got.Write(rest)
	return got.String(), err
}
