package recording

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkFastAgrees decodes line with decodeEntryFast and, when it accepts the line, checks
// that the strict decoder accepts it too with the same Entry. It returns whether the fast
// path accepted the line.
func checkFastAgrees(t testing.TB, line []byte) bool {
	t.Helper()
	line = bytes.TrimSpace(line)
	var fast Entry
	if !decodeEntryFast(line, &fast) {
		return false
	}
	strict, err := decodeStrictJSON[Entry](line)
	if err != nil {
		t.Fatalf("fast path accepted %q, strict decoder refused it: %v", line, err)
	}
	if fast != *strict {
		t.Fatalf("line %q:\nfast   %+v\nstrict %+v", line, fast, *strict)
	}
	return true
}

// randText returns a short string; one in ten holds bytes the encoder escapes or that are
// not UTF-8.
func randText(r *rand.Rand) string {
	alpha := []string{"a", "Z", "0", "/", "?", "&", "=", "<", "é", "日本", " ", ".", "-", "%20"}
	if r.IntN(10) == 0 {
		alpha = append(alpha, "\"", "\\", "\n", "\x01", "\xff")
	}
	n := r.IntN(12)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(alpha[r.IntN(len(alpha))])
	}
	return b.String()
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return -r.Int64N(1000)
	case 2:
		return r.Int64()
	}
	return r.Int64N(1 << 40)
}

// TestDecodeEntryFastAgreesWithStrict encodes random entries the way the bundle writer
// does (writeJSONLine) and checks the fast path against the strict decoder; lines without
// escapes must take the fast path.
func TestDecodeEntryFastAgreesWithStrict(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fastN := 0
	for i := 0; i < 5000; i++ {
		e := Entry{ID: randText(r), TS: randText(r), Method: randText(r), URL: randText(r),
			Status: int(randInt(r)), Mime: randText(r), Digest: randText(r), Size: randInt(r),
			ReqOffset: randInt(r), ReqLength: randInt(r), RespOffset: randInt(r), RespLength: randInt(r),
			ReqBody: randText(r), ReqType: randText(r), RevisitOf: randText(r), Unresolved: r.IntN(2) == 0,
			ResourceType: randText(r)}
		var b bytes.Buffer
		if err := writeJSONLine(&b, e); err != nil {
			t.Fatal(err)
		}
		line := b.Bytes()
		got := checkFastAgrees(t, line)
		if !bytes.Contains(line, []byte(`\`)) && !got {
			t.Fatalf("line without escapes not taken by the fast path: %q", line)
		}
		if got {
			fastN++
			if !strings.ContainsRune(e.URL+e.ID+e.TS+e.Method+e.Mime+e.Digest+e.ReqBody+e.ReqType+e.RevisitOf+e.ResourceType, '\xff') {
				var back Entry
				decodeEntryFast(bytes.TrimSpace(line), &back)
				if back != e {
					t.Fatalf("round trip: %+v, want %+v", back, e)
				}
			}
		}
	}
	if fastN < 100 {
		t.Fatalf("only %d of 5000 lines took the fast path", fastN)
	}
}

func TestDecodeEntryFastShapes(t *testing.T) {
	for _, c := range []struct {
		line string
		fast bool
	}{
		{`{"id":"e1","method":"GET","url":"https://a/?x=1&y=<2>","status":200,"size":3,"respOffset":0,"respLength":100,"reqOffset":100,"reqLength":50,"unresolved":false,"type":"document"}`, true},
		{` { "id" : "e1" , "status" : -0 , "unresolved" : true }`, true},
		{`{}`, true},
		{`{"id":"e1","id":"e2"}`, true}, // the last wins, as in encoding/json
		{`{"url":"日本"}`, true},
		{`{"ID":"e1"}`, false},                           // case-folded key
		{`{"id":"e\u0031"}`, false},                      // escape
		{`{"id":null}`, false},                           // null
		{`{"status":200.0}`, false},                      // fraction
		{`{"status":2e2}`, false},                        // exponent
		{`{"status":0200}`, false},                       // leading zero: invalid JSON
		{`{"status":99999999999999999999}`, false},       // overflow
		{`{"status":"200"}`, false},                      // wrong type
		{`{"id":1}`, false},                              // wrong type
		{`{"unresolved":1}`, false},                      // wrong type
		{`{"extra":1}`, false},                           // unknown field
		{`{"id":"e1",}`, false},                          // trailing comma
		{`{"id":"e1"}x`, false},                          // data after the object
		{`{"id":"e1"}{}`, false},                         // a second object
		{`{"id":"a` + "\xff" + `"}`, false},              // invalid UTF-8
		{`{"id":"a` + "\t" + `"}`, false},                // control byte in a string
		{`[]`, false},                                    // not an object
		{`null`, false},                                  // not an object
		{`{"id":"e1"`, false},                            // unterminated
		{`{"id" "e1"}`, false},                           // no colon
		{`{"unresolved":tru}`, false},                    // bad literal
		{`{"size":-}`, false},                            // bad number
		{`{"respOffset":1,"respLength":2 "x":1}`, false}, // no comma
	} {
		got := checkFastAgrees(t, []byte(c.line))
		if got != c.fast {
			t.Errorf("%q: fast path %v, want %v", c.line, got, c.fast)
		}
	}
}

// TestOpenBundleTakesFastPath checks that every line of a bundle written by BundleWriter
// (writeHandBundle) takes the fast path and that OpenBundle gives the written entries.
func TestOpenBundleTakesFastPath(t *testing.T) {
	dir := t.TempDir()
	want := writeHandBundle(t, dir, handExchanges())
	data, err := os.ReadFile(filepath.Join(dir, EntriesFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	for _, l := range lines {
		if !checkFastAgrees(t, l) {
			t.Errorf("line %q not taken by the fast path", l)
		}
	}
	b, err := OpenBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Entries) != len(want) || len(lines) != len(want) {
		t.Fatalf("%d entries, %d lines, want %d", len(b.Entries), len(lines), len(want))
	}
	for i := range want {
		if b.Entries[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, b.Entries[i], want[i])
		}
	}
}

// FuzzDecodeEntryFast checks that whatever the fast path accepts, the strict decoder
// accepts with the same result.
func FuzzDecodeEntryFast(f *testing.F) {
	f.Add([]byte(`{"id":"e1","method":"GET","url":"https://a/","status":200,"size":3,"respOffset":0,"respLength":100,"reqOffset":100,"reqLength":50}`))
	f.Add([]byte(`{"id":"e1","unresolved":true,"revisitOf":"e0","reqBody":"YQ==","reqType":"text/plain","mime":"text/html","digest":"ab","ts":"t","type":"xhr"}`))
	f.Add([]byte(` {"status" : -12 }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		checkFastAgrees(t, data)
		// and a whole file through readEntries still names its errors' lines
		if _, err := readEntries(bytes.NewReader(data), "entries.jsonl", 1000); err != nil && !strings.HasPrefix(err.Error(), "read entries.jsonl line ") {
			t.Fatalf("error without line: %v", err)
		}
	})
}
