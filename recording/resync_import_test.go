package recording

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pab-dev/pab/internal/warctest"
)

// TestResyncImport imports a file with a wrong Content-Length end to end, and audits it
// as a WARC file with and without strict.
func TestResyncImport(t *testing.T) {
	body := strings.Repeat("<p>hello</p>\n", 40)
	resp := warctest.Response(body)
	data := warctest.Record("request", "http://example.com/a", warctest.Request("/a"), 0, "\r\n") +
		warctest.Record("response", "http://example.com/a", resp, -3, "\r\n") +
		warctest.Record("request", "http://example.com/b", warctest.Request("/b"), 25, "\r\n") +
		warctest.Record("response", "http://example.com/b", warctest.Response("<p>b</p>"), 0, "\r\n")
	p := warctest.WriteTemp(t, "resynced.warc", []byte(data))
	dir := filepath.Join(t.TempDir(), "bundle")
	rep, err := ImportWARCs([]string{p}, dir, ImportOptions{TaskID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exchanges != 2 {
		t.Errorf("%d exchanges", rep.Exchanges)
	}
	distinct := map[string]bool{}
	for _, w := range rep.Warnings {
		if strings.Contains(w, "resynchronised") {
			distinct[w] = true // the import lists the record warning and the file warning
		}
	}
	if len(distinct) != 2 {
		t.Errorf("warnings %q", rep.Warnings)
	}
	es := checkBundleRoundTrip(t, dir)
	checkBody(t, dir, es, bodyCheck{url: "http://example.com/a", method: "GET", prefix: "<p>hello</p>", size: int64(len(body)), status: 200})
	if probs := Audit(dir); len(probs) != 0 {
		t.Errorf("bundle audit: %v", probs)
	}
	probs, warns := AuditWARCFile(p, false)
	if len(probs) != 0 || len(warns) != 2 {
		t.Errorf("audit: %v; warnings %v", probs, warns)
	}
	if probs, _ := AuditWARCFile(p, true); len(probs) != 1 || !strings.Contains(probs[0].String(), "offset "+fmt.Sprint(len(warctest.Record("request", "http://example.com/a", warctest.Request("/a"), 0, "\r\n")))) {
		t.Errorf("strict audit: %v", probs)
	}
}
