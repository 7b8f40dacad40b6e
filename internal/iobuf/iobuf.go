// Package iobuf copies streams through pooled buffers: io.Copy allocates a new 32 KiB
// buffer on every call whose source has no WriteTo and whose destination has no ReadFrom,
// which for the import's hundreds of thousands of small records (a record encoded, a
// payload digested, a gzip member inflated) was a third of its allocations.
package iobuf

import (
	"io"
	"sync"
)

// bufSize is the size of a pooled buffer in bytes (io.Copy's own).
const bufSize = 32 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Copy copies src to dst as io.Copy does (src's WriteTo or dst's ReadFrom when it has
// one), through a 32 KiB buffer lent from a pool shared by every goroutine otherwise. It
// returns the bytes copied and the first read or write error (nil at the end of src).
func Copy(dst io.Writer, src io.Reader) (int64, error) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}
