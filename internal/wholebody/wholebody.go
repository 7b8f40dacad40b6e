// Package wholebody reads an HTTP request's body whole, with a bound, before a reverse
// proxy passes the request on, so that the proxy's transport never reads the body from
// the proxy's own HTTP server.
//
// The cause (golang/go#40747): net/http's HTTP/1 server closes a handler's request body
// once the handler starts to answer (before writing the response's header), and the
// client transport, after writing Content-Length bytes of a request body, reads the body
// once more to see its end (transferWriter.writeBody). On a loaded machine the transport's
// writer can come to that read after the proxy has begun to pass the upstream's answer on:
// the read fails ("http: invalid Read on closed Body"), the transport closes the
// connection to the upstream, and the answer, half passed on, is cut (the client gets a
// cut stream; httputil.ReverseProxy logs "use of closed network connection"). A body held
// in memory has no such end: the transport reads it to io.EOF whenever it comes to it.
//
// Its users: batch's MCP front (batch/mcp.go) and the model usage meter (internal/meter).
// Each answers a refused or unreadable body in its own way.
package wholebody

import (
	"bytes"
	"io"
	"net/http"

	"github.com/pab-dev/pab/internal/readlimit"
)

// Read returns a shallow copy of r whose body is r's body read whole into memory, at most
// max bytes, with ContentLength its length and no Transfer-Encoding (a chunked body goes on
// with a Content-Length; an empty one as http.NoBody). r itself is left as it is, its body
// read. A request without a body (ContentLength 0) is returned as it is, unread.
//
// A body of more than max bytes is a *readlimit.TooLargeError (at most max+1 bytes were
// read, nothing is returned); a read error (the client gone, a malformed chunked body) is
// returned as it is. Either way the caller answers the request itself.
func Read(r *http.Request, max int64) (*http.Request, error) {
	if r.ContentLength == 0 {
		return r, nil
	}
	b, err := readlimit.All(r.Body, max)
	if err != nil {
		return nil, err
	}
	r = r.WithContext(r.Context()) // a shallow copy: the server's own request stays as it is
	r.Body = http.NoBody
	if len(b) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	return r, nil
}
