package record

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pab-dev/pab/recording"
)

func sampleExchange(i int) *exchange {
	return &exchange{Exchange: recording.Exchange{
		Method: "GET", URL: "https://shop.test/p" + strings.Repeat("x", i), Date: time.Date(2026, 11, 29, 10, 0, i, 0, time.UTC),
		ReqHeader: http.Header{"Host": {"shop.test"}, "Accept": {"text/html"}},
		Status:    200, Proto: "HTTP/1.1",
		RespHeader: http.Header{"Content-Type": {"text/html"}, "Content-Length": {"20"}},
		Body:       []byte("<html>page body</html>"[:20]), ResourceType: "document",
	}, Page: "GET"}
}

// encoded is x.encode(), failing t on an error or a warning.
func encoded(t testing.TB, x *exchange) []byte {
	t.Helper()
	b, warnings, err := x.encode()
	if err != nil || len(warnings) > 0 {
		t.Fatalf("encode: %v %q", err, warnings)
	}
	return b
}

// TestRecoverCutsPartialExchange: a journal ending in part of an exchange (what a
// killed recorder can leave) is cut after its last whole exchange, and a recorder opened
// on it logs the recovery and goes on appending.
func TestRecoverCutsPartialExchange(t *testing.T) {
	work := t.TempDir()
	path := JournalPath(work)
	var whole bytes.Buffer
	for i := range 3 {
		whole.Write(encoded(t, sampleExchange(i)))
	}
	next := encoded(t, sampleExchange(3))
	for _, cut := range []int{1, 10, len(next) / 2, len(next) - 3, len(next) - 1} {
		if err := os.WriteFile(path, append(bytes.Clone(whole.Bytes()), next[:cut]...), 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Recover(path)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Exchanges != 3 || rep.Cut != int64(cut) || rep.Size != int64(whole.Len()) {
			t.Errorf("cut %d: report %+v", cut, rep)
		}
		if data, _ := os.ReadFile(path); !bytes.Equal(data, whole.Bytes()) {
			t.Errorf("cut %d: journal not cut back to its whole exchanges", cut)
		}
	}
	// a response record without its request is cut too
	respOnly := next[:bytes.Index(next, []byte("WARC/1.1\r\nWARC-Type: request"))]
	os.WriteFile(path, append(bytes.Clone(whole.Bytes()), respOnly...), 0o600)
	if rep, err := Recover(path); err != nil || rep.Exchanges != 3 || rep.Cut != int64(len(respOnly)) {
		t.Errorf("response without request: %+v %v", rep, err)
	}

	os.WriteFile(path, append(bytes.Clone(whole.Bytes()), next[:40]...), 0o600)
	g := newRig(t, Options{WorkDir: work})
	lines := g.logLines()
	if len(lines) == 0 || lines[0].Event != "recovered" || !strings.Contains(lines[0].Note, "3 whole exchanges kept") {
		t.Errorf("log %+v", lines)
	}
	b, rep, _ := g.build()
	if rep.Exchanges != 3 || len(b.Entries) != 3 || len(b.Pages) != 3 {
		t.Errorf("built %+v, %d entries", rep, len(b.Entries))
	}
}

// TestJournalLocked: a second recorder on the same work directory is refused.
func TestJournalLocked(t *testing.T) {
	g := newRig(t, Options{})
	if _, _, err := New(Options{WorkDir: g.work, CA: g.ca}); err == nil || !strings.Contains(err.Error(), "another pab record") {
		t.Errorf("second recorder: %v", err)
	}
}

func FuzzParseResolve(f *testing.F) {
	for _, s := range []string{"shop.test:443:127.0.0.1", "h:80:[::1]:81", "h:80:::1", "a:b:c", ":::", "h:443:1.2.3.4:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		from, to, err := ParseResolve(s)
		if err != nil {
			return
		}
		if _, _, err := netSplit(from); err != nil {
			t.Errorf("%q: from %q: %v", s, from, err)
		}
		if _, _, err := netSplit(to); err != nil {
			t.Errorf("%q: to %q: %v", s, to, err)
		}
	})
}

// FuzzRecover: whatever bytes a journal holds, Recover leaves a journal that reads to
// its end as whole exchanges and builds into a bundle.
func FuzzRecover(f *testing.F) {
	one := encoded(f, sampleExchange(1))
	f.Add(one)
	f.Add(append(bytes.Clone(one), one[:100]...))
	f.Add([]byte("WARC/1.1\r\nContent-Length: 5\r\n\r\nab"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := JournalPath(dir)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Recover(path)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Size == 0 {
			return
		}
		if err := scanJournal(path, func(*journalExchange) error { return nil }); err != nil {
			t.Fatalf("recovered journal does not read whole: %v", err)
		}
		if _, err := Build(path, filepath.Join(dir, "b"), recording.Manifest{TaskID: "t"}); err != nil {
			// bad exchanges (a status out of range, a relative URL) may be refused, but
			// with a message, never a panic
			if err.Error() == "" {
				t.Fatal("empty error")
			}
		}
	})
}

func netSplit(s string) (string, string, error) { return net.SplitHostPort(s) }
