package har

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Writer writes a HAR 1.2 file as a stream: the log's head (version "1.2", creator,
// browser, pages), then each entry as it is given, then the end. Nothing is held but the
// entry being written.
type Writer struct {
	w       *bufio.Writer
	entries int
	err     error
}

// NewWriter writes the head of a HAR with log's version (set to "1.2"), creator, browser
// and pages to w; entries follow with WriteEntry, and Close ends the file.
func NewWriter(w io.Writer, log Log) (*Writer, error) {
	hw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	log.Version = "1.2"
	if log.Pages == nil {
		log.Pages = []Page{}
	}
	head, err := json.Marshal(log)
	if err != nil {
		return nil, err
	}
	// the log object without its closing brace, then the entries array
	hw.w.WriteString(`{"log":`)
	hw.w.Write(head[:len(head)-1])
	hw.w.WriteString(`,"entries":[`)
	return hw, nil
}

// WriteEntry writes one entry. Required fields that are nil slices are written as empty
// arrays, as HAR 1.2 requires them.
func (hw *Writer) WriteEntry(e *Entry) error {
	if hw.err != nil {
		return hw.err
	}
	fill(&e.Request.Cookies)
	fill(&e.Request.Headers)
	fill(&e.Request.QueryString)
	fill(&e.Response.Cookies)
	fill(&e.Response.Headers)
	b, err := json.Marshal(e)
	if err != nil {
		hw.err = fmt.Errorf("har: entry %d: %w", hw.entries, err)
		return hw.err
	}
	if hw.entries > 0 {
		hw.w.WriteByte(',')
	}
	hw.w.WriteString("\n")
	_, hw.err = hw.w.Write(b)
	hw.entries++
	return hw.err
}

func fill[T any](s *[]T) {
	if *s == nil {
		*s = []T{}
	}
}

// Close ends the entries array and the file and flushes it (it does not close the
// underlying writer). It returns the first write error.
func (hw *Writer) Close() error {
	if hw.err != nil {
		return hw.err
	}
	hw.w.WriteString("\n]}}\n")
	return hw.w.Flush()
}
