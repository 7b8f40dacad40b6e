package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/recording"
)

// TestRunHARRequestBody: in a run's HAR, a request answered exactly whose recorded
// request has a body carries that body and its Content-Type, marked
// requestBodyFromRecording (the log keeps no bodies); a GET and a POST answered as a miss
// carry none and are not marked.
func TestRunHARRequestBody(t *testing.T) {
	b := writeTestBundle(t, t.TempDir(), recording.Manifest{}, []ex{
		{method: "GET", url: "https://shop.test/", status: 200, header: []string{"Content-Type: text/html"}, body: []byte("<p>home</p>"), resType: "document"},
		{method: "POST", url: "https://shop.test/cart", reqType: "application/x-www-form-urlencoded", reqBody: []byte("item=7&qty=2"),
			status: 200, header: []string{"Content-Type: application/json"}, body: []byte(`{"ok":true}`), resType: "fetch"},
	})
	var log bytes.Buffer
	for _, l := range []LogLine{
		{Time: "2026-12-06T08:00:00.000Z", Method: "GET", URL: "https://shop.test/", Source: SourceExact, Status: 200, Entry: "e000001", MS: 1.5},
		{Time: "2026-12-06T08:00:01.000Z", Method: "POST", URL: "https://shop.test/cart", Source: SourceExact, Status: 200, Entry: "e000002", MS: 2},
		{Time: "2026-12-06T08:00:02.000Z", Method: "POST", URL: "https://shop.test/cart?x=1", Source: SourceMiss, Status: 404, MS: 1},
	} {
		line, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		log.Write(append(line, '\n'))
	}
	var out bytes.Buffer
	rep, err := WriteRunHAR(&out, &log, b, "test")
	if err != nil || rep.Entries != 3 || rep.WithBody != 2 {
		t.Fatalf("WriteRunHAR: %+v, %v", rep, err)
	}
	hr, err := har.NewReader(bytes.NewReader(out.Bytes()), har.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, ct := "", ""
		if e.Request.PostData != nil {
			bb, err := e.Request.PostData.Body()
			if err != nil {
				t.Fatal(err)
			}
			body = string(bb)
		}
		for _, h := range e.Request.Headers {
			if strings.EqualFold(h.Name, "Content-Type") {
				ct = h.Value
			}
		}
		got = append(got, strings.Join([]string{e.Request.Method, e.Request.URL, e.Pab.Source, body, ct, map[bool]string{true: "from-recording", false: "-"}[e.Pab.RequestBodyFromRecording]}, " "))
	}
	want := []string{
		"GET https://shop.test/ exact   -",
		"POST https://shop.test/cart exact item=7&qty=2 application/x-www-form-urlencoded from-recording",
		"POST https://shop.test/cart?x=1 miss   -",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run HAR requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
