package guard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pab-dev/pab/internal/jsonx"
	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/internal/syncwriter"
)

// Bounds of the JSON-RPC wire (stdio and HTTP, agent side and child side).
const (
	// MaxRequestBytes bounds one JSON-RPC message from the agent (one line on stdio, one
	// body over HTTP): the arguments' bound plus room for the envelope.
	MaxRequestBytes = MaxArgumentBytes + 64<<10
	// MaxJSONDepth bounds the nesting of arrays and objects in a message from the agent,
	// checked on the raw bytes before anything decodes them. MCP requests nest a few levels.
	MaxJSONDepth = 64
	// DefaultMaxChildReplyBytes bounds one JSON-RPC message from the browser MCP server
	// (ChildOptions.MaxReplyBytes). A snapshot is read up to 4 MiB; the agent gets 48 KiB.
	DefaultMaxChildReplyBytes = 8 << 20
)

// JSON-RPC 2.0 error codes the guard answers malformed input with
// (https://www.jsonrpc.org/specification#error_object).
const (
	codeParseError     = -32700 // not JSON, or nested deeper than MaxJSONDepth
	codeInvalidRequest = -32600 // JSON but not a request; a batch; over MaxRequestBytes
	codeInternalError  = -32603 // (child side) a reply over the size bound
)

// NewStdioTransport is the agent-side MCP transport over in and out (stdin and stdout of
// pab guard): newline-delimited JSON-RPC 2.0 (MCP's stdio transport) in which every line is
// checked before the MCP SDK sees it. A line over MaxRequestBytes, a line that is not JSON or
// nests deeper than MaxJSONDepth, a JSON value that is not one JSON-RPC message, and a batch
// (an array; MCP 2025-06-18 has none) are each answered on out with a JSON-RPC error
// response (id null, or the request's id when it could be read): -32700 parse error for
// the first kinds, -32600 invalid request for the others ("request too large" for size);
// the session goes on with the next line. Blank lines are skipped. Closing the connection
// closes in when it is an io.Closer; out is never closed.
func NewStdioTransport(in io.Reader, out io.Writer) mcp.Transport {
	w := &lockedWriter{syncwriter.Writer{W: out}}
	return &mcp.IOTransport{
		Reader:        &checkedLines{in: in, lr: readlimit.NewLineReader(bufio.NewReaderSize(in, 64<<10), MaxRequestBytes), out: w, limit: MaxRequestBytes},
		Writer:        w,
		MaxLineLength: MaxRequestBytes + 1024,
	}
}

// lockedWriter serializes whole writes to w, so that the SDK's messages and the guard's own
// error responses never interleave. Close does not close w.
type lockedWriter struct{ syncwriter.Writer }

// Close does nothing: out belongs to the caller.
func (l *lockedWriter) Close() error { return nil }

// checkedLines is the agent's input after the checks of NewStdioTransport: only lines that
// are one well-formed JSON-RPC message come out of Read, each ending in '\n'.
type checkedLines struct {
	in      io.Reader
	lr      *readlimit.LineReader
	out     io.Writer
	limit   int
	pending []byte
}

func (c *checkedLines) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		line, tooLong, err := c.lr.Next()
		if tooLong {
			writeWireError(c.out, nil, codeInvalidRequest, fmt.Sprintf("request too large: a message is at most %d bytes", c.limit))
		} else if len(bytes.TrimSpace(line)) > 0 {
			if id, code, msg := checkMessage(line); code != 0 {
				writeWireError(c.out, id, code, msg)
			} else {
				c.pending = append(append([]byte(nil), line...), '\n') // a copy: line is the reader's buffer
			}
		}
		if err != nil && len(c.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break // hand out the last line; the next Read returns err again
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *checkedLines) Close() error {
	if cl, ok := c.in.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// checkMessage judges one line from the agent: code 0 when it is one JSON-RPC message the
// SDK can take, else the JSON-RPC error code and message to answer with, and the request id
// when it could be read.
func checkMessage(line []byte) (id any, code int, msg string) {
	if jsonx.Depth(line, MaxJSONDepth) > MaxJSONDepth {
		return nil, codeParseError, fmt.Sprintf("parse error: JSON nested deeper than %d levels", MaxJSONDepth)
	}
	if !json.Valid(line) {
		return nil, codeParseError, "parse error: the line is not JSON (one JSON-RPC message per line)"
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		return nil, codeInvalidRequest, "invalid request: JSON-RPC batches are not accepted; send one message per line"
	}
	if trimmed[0] != '{' {
		return nil, codeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object"
	}
	var probe struct {
		ID     any             `json:"id"`
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(trimmed, &probe) == nil {
		switch probe.ID.(type) {
		case string, float64:
			id = probe.ID
		}
	}
	if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
		return id, codeInvalidRequest, "invalid request: " + bound(err.Error(), 200)
	}
	if probe.Method == nil && probe.Result == nil && probe.Error == nil {
		// the SDK would take it for a reply to nothing and drop it, leaving the sender waiting
		return id, codeInvalidRequest, "invalid request: a message needs a method (a request or notification) or a result or error (a response)"
	}
	return nil, 0, ""
}

// writeWireError writes one JSON-RPC error response line to w.
func writeWireError(w io.Writer, id any, code int, msg string) {
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	if err != nil {
		return
	}
	w.Write(append(data, '\n'))
}

// replyIDRe finds the id at the end of a reply line (the TypeScript SDK writes
// {"result":...,"jsonrpc":"2.0","id":N}); a reply too large to read is answered for that id.
var (
	replyIDTailRe = regexp.MustCompile(`"id"\s*:\s*(\d{1,15}|"[^"\\]{1,100}")\s*\}\s*$`)
	replyIDHeadRe = regexp.MustCompile(`^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d{1,15}|"[^"\\]{1,100}")`)
)

// boundedReplies is the child's output with every line bounded: a line over limit is
// dropped and, when its id can be read from its first or last bytes, replaced by a JSON-RPC
// error response for that id (so the call fails and the session goes on); when it cannot,
// Read fails (the connection is then broken, and every call fails at once).
type boundedReplies struct {
	in      io.ReadCloser
	br      *bufio.Reader
	limit   int
	pending []byte
}

func newBoundedReplies(in io.ReadCloser, limit int) *boundedReplies {
	return &boundedReplies{in: in, br: bufio.NewReaderSize(in, 64<<10), limit: limit}
}

func (r *boundedReplies) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		line, id, tooLong, err := r.readLine()
		switch {
		case tooLong && id != nil:
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
				"error": map[string]any{"code": codeInternalError, "message": fmt.Sprintf("the browser's reply is over %d bytes and was dropped", r.limit)}})
			r.pending = append(data, '\n')
		case tooLong:
			return 0, fmt.Errorf("the browser MCP server sent a message over %d bytes", r.limit)
		case len(line) > 0:
			r.pending = append(line, '\n')
		}
		if err != nil && len(r.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// readLine reads one line of at most limit bytes; for a longer one it keeps only the first
// and last 256 bytes to find the id.
func (r *boundedReplies) readLine() (line, id []byte, tooLong bool, err error) {
	var head, tail []byte
	for {
		chunk, e := r.br.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > r.limit+1 {
			tooLong = true
			head = append([]byte(nil), line[:min(len(line), 256)]...)
			if len(head) < 256 {
				head = append(head, chunk[:min(len(chunk), 256-len(head))]...)
			}
			line = nil
		}
		if tooLong {
			tail = append(tail, chunk...)
			if len(tail) > 256 {
				tail = append([]byte(nil), tail[len(tail)-256:]...)
			}
		} else {
			line = append(line, chunk...)
		}
		if errors.Is(e, bufio.ErrBufferFull) {
			continue
		}
		err = e
		break
	}
	if tooLong {
		if m := replyIDTailRe.FindSubmatch(tail); m != nil {
			id = m[1]
		} else if m := replyIDHeadRe.FindSubmatch(head); m != nil {
			id = m[1]
		}
		return nil, id, true, err
	}
	return bytes.TrimRight(line, "\r\n"), nil, false, err
}

func (r *boundedReplies) Close() error { return r.in.Close() }
