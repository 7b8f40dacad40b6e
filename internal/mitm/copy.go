package mitm

import (
	"io"
	"net/http"
	"sync"
)

// copyBufs are the buffers answers are copied through (32 KiB), shared by every request.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Buffer lends a 32 KiB buffer from the pool the shell's handlers share; give it back
// with PutBuffer once done.
func Buffer() *[]byte { return copyBufs.Get().(*[]byte) }

// PutBuffer gives back a buffer lent by Buffer.
func PutBuffer(b *[]byte) { copyBufs.Put(b) }

// Copy copies src to w through a pooled buffer, as io.Copy does but without the
// ResponseWriter's ReadFrom (which would take a 32 KiB buffer of its own for a source
// that is not a file). With flush set, every read is flushed to the client as it comes
// (streamed answers: chunked bodies, server-sent events), as httputil.ReverseProxy does.
// It returns the bytes written and the first read or write error (nil at the end of src).
func Copy(w http.ResponseWriter, src io.Reader, flush bool) (int64, error) {
	bp := Buffer()
	defer PutBuffer(bp)
	buf := *bp
	if !flush {
		return io.CopyBuffer(writerOnly{w}, src, buf)
	}
	rc := http.NewResponseController(w)
	var n int64
	for {
		m, err := src.Read(buf)
		if m > 0 {
			k, werr := w.Write(buf[:m])
			n += int64(k)
			if werr != nil {
				return n, werr
			}
			_ = rc.Flush()
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// writerOnly hides a ResponseWriter's ReadFrom, so that copies use the pooled buffer.
type writerOnly struct{ io.Writer }
