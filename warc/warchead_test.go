package warc

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestParseWARCHead(t *testing.T) {
	lines := []string{
		"WARC/1.1",
		"WARC-Type: response",
		"WARC-Target-URI: https://shop.test/a",
		"\t?b=1", // folded onto the field before it (WARC 1.1 section 4, LWS)
		"WARC-Type: request",
		"Content-Length:  42 ",
	}
	h, err := ParseWARCHead(lines)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Fields.Get("WARC-Target-URI"); got != "https://shop.test/a ?b=1" {
		t.Errorf("folded field = %q", got)
	}
	if got := h.Fields.Get("warc-type"); got != "response" {
		t.Errorf("repeated field: first is %q, want response", got)
	}
	if h.ContentLength != 42 {
		t.Errorf("Content-Length = %d", h.ContentLength)
	}
	for _, tc := range []struct {
		lines []string
		want  string
	}{
		{[]string{"HTTP/1.1 200 OK", "Content-Length: 1"}, "no WARC version line where a record should start"},
		{[]string{"WARC/1.1", "WARC-Type response"}, "malformed warc header line"},
		{[]string{"WARC/1.1", "WARC-Type: response"}, "no Content-Length"},
		{[]string{"WARC/1.1", "Content-Length: -3"}, `bad Content-Length "-3"`},
		{nil, "no WARC version line"},
	} {
		if _, err := ParseWARCHead(tc.lines); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.lines, err, tc.want)
		}
	}
}

func TestReadHeadStopsAtTheEmptyLine(t *testing.T) {
	in := "WARC/1.1\r\nContent-Length: 4\r\n\r\nbody"
	br := bufio.NewReader(strings.NewReader(in))
	lines, n, err := ReadHead(br, 1024, false)
	if err != nil || len(lines) != 2 || n != int64(len(in)-4) {
		t.Fatalf("lines %q, n %d, err %v", lines, n, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "body" {
		t.Errorf("read past the head: rest %q", rest)
	}
	for _, tc := range []struct {
		in      string
		max     int64
		eofEnds bool
		want    string
	}{
		{"WARC/1.1\r\nA: b\r\n", 1024, false, "truncated header after 16 bytes"},
		{"HTTP/1.1 200 OK\r\nA: b", 1024, true, "truncated header after 21 bytes"},
		{"\r\n", 1024, false, "empty header"},
		{"", 1024, true, "empty header"},
		{"WARC/1.1\r\n" + strings.Repeat("A", 100) + "\r\n\r\n", 64, false, "header longer than 64 bytes"},
	} {
		_, _, err := ReadHead(bufio.NewReaderSize(strings.NewReader(tc.in), 16), tc.max, tc.eofEnds)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: err %v, want %q", tc.in, err, tc.want)
		}
	}
	if lines, _, err := ReadHead(bufio.NewReader(strings.NewReader("HTTP/1.1 304 Not Modified\r\nA: b\r\n")), 1024, true); err != nil || len(lines) != 2 {
		t.Errorf("a head ended by the end of its block: %q, %v", lines, err)
	}
}

// FuzzWARCHead reads and parses any bytes as a record's head: no panic, never more than the
// bound, the count of bytes consumed agrees with the lines, and nothing after the empty line
// is consumed.
func FuzzWARCHead(f *testing.F) {
	f.Add([]byte("WARC/1.1\r\nWARC-Type: response\r\n folded\r\nContent-Length: 3\r\n\r\nabc"), int64(4096))
	f.Add([]byte("WARC/1.0\nContent-Length: x\n\n"), int64(10))
	f.Add([]byte("\r\n"), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, max int64) {
		if max <= 0 || max > 1<<20 {
			max = 4096
		}
		br := bufio.NewReaderSize(strings.NewReader(string(data)), 16)
		lines, n, err := ReadHead(br, max, len(data)%2 == 0)
		if err != nil {
			return
		}
		if n > max || n > int64(len(data)) {
			t.Fatalf("consumed %d bytes of %d, bound %d", n, len(data), max)
		}
		rest, _ := io.ReadAll(br)
		if int64(len(rest)) != int64(len(data))-n {
			t.Fatalf("consumed %d bytes, but %d are left of %d", n, len(rest), len(data))
		}
		for _, l := range lines {
			if l == "" || strings.ContainsAny(l, "\n") {
				t.Fatalf("line %q", l)
			}
		}
		if h, err := ParseWARCHead(lines); err == nil && h.ContentLength < 0 {
			t.Fatalf("Content-Length %d", h.ContentLength)
		}
	})
}
