package recording

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
	"github.com/pab-dev/pab/warc"
)

var t0 = time.Date(2026, 10, 22, 10, 40, 57, 458_000_000, time.UTC)

func sampleExchanges() []Exchange {
	big := []byte(strings.Repeat("<p>identical payload</p>\n", 60)) // 1500 bytes
	return []Exchange{
		{
			Method: "GET", URL: "https://shop.test/page?q=1", Date: t0.Add(2 * time.Second),
			ReqHeader: http.Header{
				"Accept":              {"text/html"},
				"Cookie":              {"session=secret-cookie"},
				"Authorization":       {"Bearer secret-token"},
				"Proxy-Authorization": {"Basic secret-proxy"},
				"Sec-Fetch-Dest":      {"document"},
			},
			Status: 200, Proto: "HTTP/2.0",
			RespHeader: http.Header{
				"Content-Type":      {"text/html; charset=utf-8"},
				"Set-Cookie":        {"sid=secret-sid; Path=/", "uid=secret-uid"},
				"Transfer-Encoding": {"chunked"},
				"Content-Encoding":  {"gzip"},
				"Content-Length":    {"99"},
				"Link":              {"</a.css>; rel=preload", "</b.js>; rel=preload"},
				"X-Joined":          {"first\nsecond"},
				"Bad Name":          {"dropped"},
			},
			Body: big, OrigEncoding: "gzip", ResourceType: "document",
		},
		{URL: "https://cdn.test/copy", Date: t0, Status: 200, RespHeader: http.Header{"Content-Type": {"text/html"}}, Body: big},
		{URL: "https://shop.test/small", Date: t0.Add(time.Second), Status: 200, Body: []byte("tiny body")},
		{URL: "https://shop.test/small2", Date: t0.Add(time.Second), Status: 200, Body: []byte("tiny body")},
		{
			Method: "POST", URL: "https://shop.test/form", Date: t0.Add(3 * time.Second), Status: 303,
			ReqHeader: http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=UTF-8"}},
			ReqBody:   []byte("a=1&b=2"), RespHeader: http.Header{"Location": {"/done"}},
		},
		{URL: "https://shop.test/again", Date: t0.Add(4 * time.Second), Status: 200, RevisitOf: "e000003"},
		{
			URL: "https://shop.test/gone", Date: t0.Add(5 * time.Second), Status: 200,
			RespHeader: http.Header{"Content-Type": {"text/css"}, "Content-Length": {"1270"}},
			Unresolved: &UnresolvedRevisit{TargetURI: "https://old.test/gone", Date: t0.Add(-time.Hour), PayloadDigest: "sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A"},
		},
	}
}

func writeBundle(t testing.TB, dir string, xs []Exchange, pages []Page) []Entry {
	t.Helper()
	w, err := NewBundleWriter(dir, Manifest{TaskID: "demo", Locale: "en-US"})
	if err != nil {
		t.Fatal(err)
	}
	var es []Entry
	for _, x := range xs {
		e, err := w.Add(x)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	for _, p := range pages {
		if err := w.AddPage(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return es
}

func TestBundleWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	es := writeBundle(t, dir, sampleExchanges(), []Page{{URL: "https://shop.test/page?q=1", TS: "2026-10-22T10:40:59.458Z", Fetched: "GET", Title: "Shop"}})

	if es[0].ID != "e000001" || es[6].ID != "e000007" {
		t.Errorf("ids %s %s", es[0].ID, es[6].ID)
	}
	if es[0].RevisitOf != "" || es[1].RevisitOf != "e000001" || es[1].Size != 1500 || es[1].Digest != es[0].Digest {
		t.Errorf("dedup: %+v", es[1])
	}
	if es[3].RevisitOf != "" || es[5].RevisitOf != "e000003" || es[5].Size != 9 {
		t.Errorf("small payloads: %+v / %+v", es[3], es[5])
	}
	if !es[6].Unresolved || es[6].Digest != "" || es[6].Size != 0 {
		t.Errorf("unresolved: %+v", es[6])
	}
	if es[4].Method != "POST" || es[4].ReqType != "application/x-www-form-urlencoded" ||
		es[4].ReqBody != base64.StdEncoding.EncodeToString([]byte("a=1&b=2")) {
		t.Errorf("post: %+v", es[4])
	}
	if es[0].Mime != "text/html" || es[0].ResourceType != "document" || es[0].TS != "2026-10-22T10:40:59.458Z" || es[1].Method != "GET" {
		t.Errorf("entry 0: %+v", es[0])
	}

	data, err := os.ReadFile(filepath.Join(dir, WARCFile))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, secret := range []string{"secret-cookie", "secret-token", "secret-proxy", "secret-sid", "secret-uid", "Transfer-Encoding", "Bad Name", "Content-Length: 99\r\n"} {
		if strings.Contains(s, secret) {
			t.Errorf("data.warc contains %q", secret)
		}
	}
	for _, want := range []string{
		"Set-Cookie: REDACTED\r\nSet-Cookie: REDACTED\r\n",
		"Link: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n",
		"X-Joined: first\r\nX-Joined: second\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1500\r\n",
		"RR-Original-Content-Encoding: gzip\r\n",
		"RR-Exchange-Id: e000001\r\nRR-Resource-Type: document\r\n",
		"WARC-Profile: " + RevisitProfile + "\r\n",
		"WARC-Refers-To-Target-URI: https://old.test/gone\r\nWARC-Refers-To-Date: 2026-10-22T09:40:57.458Z\r\n",
		"WARC-Payload-Digest: sha1:B2LTWWPUOYAH7UIPQ7ZUPQ4VMBSVC36A\r\n",
		"POST /form HTTP/1.1\r\nContent-Length: 7\r\nContent-Type: application/x-www-form-urlencoded; charset=UTF-8\r\nHost: shop.test\r\n\r\na=1&b=2",
		"GET /page?q=1 HTTP/1.1\r\nAccept: text/html\r\nHost: shop.test\r\nSec-Fetch-Dest: document\r\n\r\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("data.warc lacks %q", want)
		}
	}
	if strings.Contains(s, "\r\nContent-Encoding:") {
		t.Errorf("Content-Encoding kept on a decoded body")
	}
	if strings.Count(s, "WARC/1.1\r\n") != 14 {
		t.Errorf("%d records, want 14", strings.Count(s, "WARC/1.1\r\n"))
	}

	var m Manifest
	mb, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil || json.Unmarshal(mb, &m) != nil {
		t.Fatal(err)
	}
	if m.TaskID != "demo" || m.Locale != "en-US" || m.CapturedFrom != "2026-10-22T10:40:57.458Z" || m.CapturedTo != "2026-10-22T10:41:02.458Z" {
		t.Errorf("manifest %+v", m)
	}
	pb, _ := os.ReadFile(filepath.Join(dir, PagesFile))
	if string(pb) != `{"url":"https://shop.test/page?q=1","ts":"2026-10-22T10:40:59.458Z","fetched":"GET","title":"Shop"}`+"\n" {
		t.Errorf("pages %q", pb)
	}
	got := checkBundleRoundTrip(t, dir)
	if len(got) != len(es) {
		t.Fatalf("%d entries in file, %d added", len(got), len(es))
	}
	for i := range es {
		if got[i] != es[i] {
			t.Errorf("entry %d: file %+v, Add %+v", i, got[i], es[i])
		}
	}
	if w := leftovers(t, filepath.Dir(dir)); len(w) != 1 {
		t.Errorf("parent holds %v", w)
	}
}

// checkBundleRoundTrip reopens archive/data.warc with gowarc (digests and lengths
// validated) at every entry's response and request offset and checks that the records
// found are the entry's; it returns the entries of indexes/entries.jsonl.
func checkBundleRoundTrip(t testing.TB, dir string) []Entry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, EntriesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var es []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("entries.jsonl: %v", err)
		}
		es = append(es, e)
	}
	warcPath := filepath.Join(dir, WARCFile)
	fi, err := os.Stat(warcPath)
	if err != nil {
		t.Fatal(err)
	}
	var covered int64
	for _, e := range es {
		resp := openRecordAt(t, warcPath, e.RespOffset, e.RespLength)
		wantType := gowarc.Response
		if e.RevisitOf != "" || e.Unresolved {
			wantType = gowarc.Revisit
		}
		h := resp.WarcRecord.WarcHeader()
		if resp.WarcRecord.Type() != wantType || h.Get("RR-Exchange-Id") != e.ID || h.Get(gowarc.WarcTargetURI) != e.URL {
			t.Errorf("%s: response record is %s %s %s", e.ID, resp.WarcRecord.Type(), h.Get("RR-Exchange-Id"), h.Get(gowarc.WarcTargetURI))
		}
		if wantType == gowarc.Response {
			pb, ok := resp.WarcRecord.Block().(gowarc.PayloadBlock)
			if !ok {
				t.Fatalf("%s: block %T", e.ID, resp.WarcRecord.Block())
			}
			r, err := pb.PayloadBytes()
			if err != nil {
				t.Fatal(err)
			}
			payload, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(payload)
			if hex.EncodeToString(sum[:]) != e.Digest || int64(len(payload)) != e.Size {
				t.Errorf("%s: payload of %d bytes does not match entry digest/size %d", e.ID, len(payload), e.Size)
			}
		}
		if e.RevisitOf != "" {
			orig := es[indexOfID(es, e.RevisitOf)]
			o := openRecordAt(t, warcPath, orig.RespOffset, orig.RespLength)
			if h.Get(gowarc.WarcRefersTo) != o.WarcRecord.WarcHeader().Get(gowarc.WarcRecordID) {
				t.Errorf("%s: refers to %s", e.ID, h.Get(gowarc.WarcRefersTo))
			}
		}
		req := openRecordAt(t, warcPath, e.ReqOffset, e.ReqLength)
		rh := req.WarcRecord.WarcHeader()
		if req.WarcRecord.Type() != gowarc.Request || rh.Get("RR-Exchange-Id") != e.ID ||
			rh.GetId(gowarc.WarcConcurrentTo) != h.GetId(gowarc.WarcRecordID) {
			t.Errorf("%s: request record %s concurrent to %s", e.ID, req.WarcRecord.Type(), rh.Get(gowarc.WarcConcurrentTo))
		}
		if e.ReqOffset != e.RespOffset+e.RespLength {
			t.Errorf("%s: request at %d, response ends at %d", e.ID, e.ReqOffset, e.RespOffset+e.RespLength)
		}
		// The package's own reader finds the same records.
		for _, span := range [][2]int64{{e.RespOffset, e.RespLength}, {e.ReqOffset, e.ReqLength}} {
			wf, err := os.Open(warcPath)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := warc.ReadRecordAt(wf, warcPath, span[0], span[1])
			_ = wf.Close()
			if err != nil {
				t.Errorf("%s at %d: %v", e.ID, span[0], err)
			} else if rec.Get("RR-Exchange-Id") != e.ID || len(rec.Warnings) != 0 || rec.Length != span[1] {
				t.Errorf("%s at %d: record %s of %d bytes, warnings %v", e.ID, span[0], rec.Get("RR-Exchange-Id"), rec.Length, rec.Warnings)
			}
		}
		covered += e.RespLength + e.ReqLength
	}
	if covered != fi.Size() {
		t.Errorf("entries cover %d bytes of %d", covered, fi.Size())
	}
	return es
}

func indexOfID(es []Entry, id string) int {
	for i, e := range es {
		if e.ID == id {
			return i
		}
	}
	return -1
}

// openRecordAt reads the record at off with gowarc, full validation on, and checks its
// size and that gowarc found nothing to complain about.
func openRecordAt(t testing.TB, path string, off, length int64) gowarc.Record {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(path, off)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rec, err := r.Next()
	if err != nil {
		t.Fatalf("gowarc at %d: %v", off, err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	if rec.Offset != off || rec.Size != length {
		t.Errorf("gowarc at %d: record at %d of %d bytes, entry says %d", off, rec.Offset, rec.Size, length)
	}
	if len(rec.Validation) != 0 {
		t.Errorf("gowarc at %d: %v", off, rec.Validation)
	}
	return rec
}

func leftovers(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestBundleWriterDeterministic(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	writeBundle(t, a, sampleExchanges(), nil)
	writeBundle(t, b, sampleExchanges(), nil)
	for _, name := range []string{ManifestFile, WARCFile, EntriesFile, PagesFile} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two writes", name)
		}
	}
}

func TestBundleWriterAtomic(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "rec")

	// Abort leaves nothing.
	w, err := NewBundleWriter(dir, Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add(sampleExchanges()[2]); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if got := leftovers(t, parent); len(got) != 0 {
		t.Fatalf("after Abort: %v", got)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after Abort succeeded")
	}

	// Bad input is refused without breaking the writer.
	w, err = NewBundleWriter(dir, Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []Exchange{
		{URL: "/relative", Date: t0, Status: 200},
		{URL: "https://a.test/", Status: 200},
		{URL: "https://a.test/", Date: t0, Status: 42},
		{URL: "https://a.test/", Date: t0, Status: 200, Method: "G T"},
		{URL: "https://a.test/", Date: t0, Status: 200, RevisitOf: "e000009"},
	} {
		if _, err := w.Add(x); err == nil {
			t.Errorf("%+v accepted", x)
		}
	}
	e, err := w.Add(sampleExchanges()[2])
	if err != nil || e.ID != "e000001" {
		t.Fatalf("%v %+v", err, e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the bundle.
	if err := os.WriteFile(filepath.Join(dir, "stale"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, dir, sampleExchanges()[:3], nil)
	if _, err := os.Stat(filepath.Join(dir, "stale")); !os.IsNotExist(err) {
		t.Errorf("old bundle not replaced: %v", err)
	}
	if got := leftovers(t, parent); len(got) != 1 || got[0] != "rec" {
		t.Errorf("parent holds %v", got)
	}
	if es := checkBundleRoundTrip(t, dir); len(es) != 3 {
		t.Errorf("%d entries", len(es))
	}
	// A file where the bundle should go is refused.
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBundleWriter(file, Manifest{}); err == nil {
		t.Error("bundle over a file accepted")
	}
}

func TestRecordIDDeterministicAndDistinct(t *testing.T) {
	a := warc.RecordID("e000001", "response", "https://a.test/", "2026-01-01T00:00:00.000Z", []byte("x"))
	b := warc.RecordID("e000001", "response", "https://a.test/", "2026-01-01T00:00:00.000Z", []byte("x"))
	c := warc.RecordID("e000001", "request", "https://a.test/", "2026-01-01T00:00:00.000Z", []byte("x"))
	if a != b || a == c || len(a) != len("<urn:uuid:00000000-0000-0000-0000-000000000000>") || a[24] != '8' {
		t.Errorf("%s %s %s", a, b, c)
	}
}

func TestBundleWriterRevisitOfRevisit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	xs := sampleExchanges()[:2] // e000002 is stored as a revisit of e000001
	xs = append(xs, Exchange{URL: "https://shop.test/third", Date: t0, Status: 200, RevisitOf: "e000002"})
	es := writeBundle(t, dir, xs, nil)
	if es[1].RevisitOf != "e000001" || es[2].RevisitOf != "e000001" || es[2].Size != 1500 {
		t.Errorf("entries %+v", es)
	}
	checkBundleRoundTrip(t, dir)
}

// TestEncodeExchangeIsTheWritersEncoding: EncodeExchange gives, byte for byte, the two
// records BundleWriter.Add writes for the same exchange under the same id (the one
// encoding record's journal and the bundle share), with its warnings, and the extra
// fields on the response record only; it refuses revisits.
func TestEncodeExchangeIsTheWritersEncoding(t *testing.T) {
	xs := sampleExchanges()
	dir := filepath.Join(t.TempDir(), "b")
	es := writeBundle(t, dir, xs[:5], nil)
	data, err := os.ReadFile(filepath.Join(dir, "archive", "data.warc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2, 4} { // not revisits in the bundle
		e := es[i]
		got, warnings, err := EncodeExchange(xs[i], e.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := data[e.RespOffset : e.ReqOffset+e.ReqLength]; !bytes.Equal(got, want) {
			t.Errorf("%s: EncodeExchange differs from the bundle's records:\n%q\nwant\n%q", e.ID, got, want)
		}
		if wantWarn := i == 0; (len(warnings) > 0) != wantWarn || (wantWarn && !strings.Contains(warnings[0], `"Bad Name"`)) {
			t.Errorf("%s: warnings %q", e.ID, warnings)
		}
	}
	got, _, err := EncodeExchange(xs[2], "j1", []warc.Field{{Name: "RR-Page", Value: "GET"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, req, _ := bytes.Cut(got, []byte("\r\n\r\nWARC/1.1\r\n"))
	if !bytes.Contains(resp, []byte("\r\nRR-Page: GET\r\n")) || bytes.Contains(req, []byte("RR-Page")) {
		t.Errorf("extra field not on the response record alone:\n%s", got)
	}
	if _, _, err := EncodeExchange(xs[5], "j2", nil); err == nil || !strings.Contains(err.Error(), "no revisits") {
		t.Errorf("revisit: err %v", err)
	}
}

// TestAddRefusesHeaderTooLarge: an exchange whose WARC header would pass
// MaxWARCHeaderBytes (a very long URL) is refused with ErrHeaderTooLarge and leaves the
// writer usable; one at the limit is written and reads back, unpacked and published in
// place.
func TestAddRefusesHeaderTooLarge(t *testing.T) {
	ex := func(url string) Exchange {
		return Exchange{URL: url, Date: t0, Status: 200, RespHeader: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("long")}
	}
	base := "https://a.test/q?x="
	// the response record's header is the larger of the two: find the URL that fills it
	a := &BundleWriter{}
	fit := base + strings.Repeat("y", warc.MaxWARCHeaderBytes)
	for {
		ad, err := a.checkExchange(ex(fit), "e000002")
		if err != nil {
			t.Fatal(err)
		}
		if err := ad.buildHeads(a); err != nil {
			t.Fatal(err)
		}
		if err := ad.digestPayload(a); err != nil {
			t.Fatal(err)
		}
		n := max(warc.HeaderSize(ad.responseFields(), int64(ad.head.Len())+ad.payloadLen), warc.HeaderSize(ad.requestFields(), int64(ad.qblock.Len())))
		if n <= warc.MaxWARCHeaderBytes {
			break
		}
		fit = fit[:len(fit)-(n-warc.MaxWARCHeaderBytes)]
	}
	dir := filepath.Join(t.TempDir(), "b")
	w, err := NewBundleWriter(dir, Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add(ex(fit + "y")); !errors.Is(err, warc.ErrHeaderTooLarge) || !strings.Contains(err.Error(), "more than the limit of 65536") {
		t.Fatalf("over the limit: %v", err)
	}
	if _, _, err := EncodeExchange(ex(fit+"y"), "e000002", nil); !errors.Is(err, warc.ErrHeaderTooLarge) {
		t.Fatalf("EncodeExchange over the limit: %v", err)
	}
	for _, u := range []string{"https://a.test/short", fit} {
		if _, err := w.Add(ex(u)); err != nil {
			t.Fatalf("%d-byte URL: %v", len(u), err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	published := filepath.Join(t.TempDir(), "recording")
	if err := Pack(dir, published); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, published} {
		b, err := OpenBundle(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Entries) != 2 || b.Entries[1].URL != fit {
			t.Fatalf("%s: entries %d", d, len(b.Entries))
		}
		resp, err := b.Response(&b.Entries[1])
		if err != nil {
			t.Fatalf("%s: the record at the limit does not read back: %v", d, err)
		}
		if body, _ := io.ReadAll(resp.Body); string(body) != "long" {
			t.Errorf("%s: body %q", d, body)
		}
		b.Close()
	}
}
