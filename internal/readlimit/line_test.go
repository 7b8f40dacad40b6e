package readlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

type lineResult struct {
	line    string
	isNil   bool
	tooLong bool
	err     error
}

func readAll(in string, bufSize, max int) []lineResult {
	r := NewLineReader(bufio.NewReaderSize(strings.NewReader(in), bufSize), max)
	var out []lineResult
	for {
		line, tooLong, err := r.Next()
		out = append(out, lineResult{string(line), line == nil, tooLong, err})
		if err != nil {
			return out
		}
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	in := "a\r\n\n" + long + "\n" + strings.Repeat("y", 10) + "\r\n" + long + long + "\nlast"
	for _, bufSize := range []int{16, 4096} { // lines across buffer refills, and within one
		got := readAll(in, bufSize, 10)
		want := []lineResult{
			{"a", false, false, nil},
			{"", false, false, nil}, // an empty line is not nil
			{"", true, true, nil},   // too long, dropped; the next line still reads
			{strings.Repeat("y", 10), false, false, nil},
			{"", true, true, nil},
			{"last", false, false, io.EOF},
		}
		if len(got) != len(want) {
			t.Fatalf("buffer %d: got %d lines %+v, want %d", bufSize, len(got), got, len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("buffer %d, line %d: got %+v, want %+v", bufSize, i+1, got[i], want[i])
			}
		}
	}
	if got := readAll("", 16, 10); len(got) != 1 || !got[0].isNil || got[0].err != io.EOF || got[0].tooLong {
		t.Errorf("empty input: %+v", got)
	}
	if got := readAll("abc\n", 16, 10); len(got) != 2 || !got[1].isNil || got[1].err != io.EOF {
		t.Errorf("input ending in a newline: %+v", got)
	}
	// exactly max bytes fits, with either line end; one more does not
	if got := readAll("0123456789\r\n0123456789\n0123456789a\n", 16, 10); got[0].line != "0123456789" || got[1].line != "0123456789" || !got[2].tooLong {
		t.Errorf("bound: %+v", got)
	}
}

type failingReader struct{ data string }

var errDisk = errors.New("input/output error")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, errDisk
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestLineReaderError(t *testing.T) {
	r := NewLineReader(bufio.NewReaderSize(&failingReader{"ok\npart"}, 16), 10)
	if line, _, err := r.Next(); string(line) != "ok" || err != nil {
		t.Fatalf("first line %q, %v", line, err)
	}
	if line, _, err := r.Next(); string(line) != "part" || !errors.Is(err, errDisk) {
		t.Errorf("cut by a read error: %q, %v", line, err)
	}
}

// FuzzLineReader: the lines read back, joined, are the input's lines that fit; never a
// line over the bound, never a panic.
func FuzzLineReader(f *testing.F) {
	f.Add("a\nbb\r\n\nccc", 2)
	f.Add(strings.Repeat("z", 40)+"\n", 5)
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max < 0 || max > 1<<16 {
			max = 8
		}
		r := NewLineReader(bufio.NewReaderSize(strings.NewReader(in), 16), max)
		var got []string
		for i := 0; ; i++ {
			line, tooLong, err := r.Next()
			if len(line) > max || (tooLong && line != nil) {
				t.Fatalf("line %q (tooLong %v) over the bound %d", line, tooLong, max)
			}
			if line != nil || tooLong {
				got = append(got, string(line))
			}
			if err != nil {
				break
			}
			if i > len(in)+1 {
				t.Fatal("no progress")
			}
		}
		var want []string
		if in != "" {
			lines := strings.Split(in, "\n")
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			for _, l := range lines {
				l = strings.TrimSuffix(l, "\r")
				if len(l) > max {
					l = ""
				}
				want = append(want, l)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// TestLineReaderMemory: a line far over the bound is read past without being held whole.
func TestLineReaderMemory(t *testing.T) {
	const max = 1 << 20
	in := "ok\n" + strings.Repeat("x", 5<<20) + "\nnext\n"
	r := NewLineReader(bufio.NewReaderSize(strings.NewReader(in), 128<<10), max)
	var got []string
	for {
		line, tooLong, err := r.Next()
		if c := cap(r.buf); c > max+(256<<10) {
			t.Fatalf("buffer grew to %d bytes", c)
		}
		if line != nil || tooLong {
			got = append(got, fmt.Sprintf("%q %v", line, tooLong))
		}
		if err != nil {
			break
		}
	}
	if want := []string{`"ok" false`, `"" true`, `"next" false`}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %q, want %q", got, want)
	}
}
