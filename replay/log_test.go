package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestReadLogErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"method":"GET","url":"http://a/","source":"exact"}` + "\n" + `not json`, "read x.jsonl line 2:"},
		{"\n\n" + `{"method":"GET"}`, "read x.jsonl line 3: not a replay log line"},
		{`null`, "read x.jsonl line 1: not a JSON object"},
		{`[1,2]`, "read x.jsonl line 1:"},
		{`{"method":"GET","url":"http://a/","source":"exact","status":"x"}`, "read x.jsonl line 1:"},
		{strings.Repeat("x", MaxReadLogLine+1), "read x.jsonl line 1: longer than"},
	} {
		_, err := ReadLog(strings.NewReader(c.in), "x.jsonl")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ReadLog(%.40q): %v, want prefix %q", c.in, err, c.want)
		}
	}
	lines, err := ReadLog(strings.NewReader("\n"+`{"time":"t","method":"GET","url":"http://a/","key":"GET a/","type":"document","source":"exact","status":200,"entry":"e1","record":"<r>","ms":1.5,"note":"n"}`+"\n\n"), "x")
	if err != nil || len(lines) != 1 {
		t.Fatal(lines, err)
	}
	if l := lines[0]; l.MS != 1.5 || l.Entry != "e1" || l.Record != "<r>" || l.Note != "n" || l.Status != 200 {
		t.Errorf("%+v", l)
	}
}

func FuzzReadLog(f *testing.F) {
	f.Add([]byte(`{"time":"2026-01-01T00:00:00.000Z","method":"GET","url":"https://a.test/","key":"GET a.test/","type":"document","source":"exact","status":200,"entry":"e000001","record":"<urn:uuid:x>","ms":0.25}`))
	f.Add([]byte("{}\n{\"method\":\"GET\"}\n"))
	f.Add([]byte(`{"method":"GET","url":"u","source":"miss","status":1e999}`))
	f.Add([]byte("\xff\xfe\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := ReadLog(bytes.NewReader(data), "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		for _, l := range lines {
			if l.Method == "" || l.URL == "" || l.Source == "" {
				t.Errorf("incomplete line accepted: %+v", l)
			}
		}
		_ = Summarize(lines)
	})
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestLogWriteErrorOnClose(t *testing.T) {
	lw := newLogWriter(errWriter{})
	lw.send(encodeLogLine(LogLine{Method: "GET", URL: "http://a/", Source: "miss"}))
	err := lw.close()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("close: %v", err)
	}
	lw.send(encodeLogLine(LogLine{})) // after close: dropped, no panic
}

func TestSummarizeAndSpares(t *testing.T) {
	ix := testIndex(t)
	lines := []LogLine{
		{Method: "GET", URL: "https://site.test/", Key: "GET site.test/", Type: "document", Source: "exact", Entry: "e000001"},
		{Method: "GET", URL: "https://site.test/a.png", Key: "GET site.test/a.png", Type: "image", Source: "miss"},
		{Method: "GET", URL: "https://site.test/b.png", Key: "GET site.test/b.png", Type: "image", Source: "miss"},
		{Method: "GET", URL: "https://site.test/b.png?x", Key: "GET site.test/b.png", Type: "image", Source: "miss"},
		{Method: "GET", URL: "https://site.test/search?q=x", Type: "document", Source: "fuzzy", Entry: "e000004"},
		{Method: "GET", URL: "https://t.test/", Type: "tracker", Source: "blocked"},
	}
	st := Summarize(lines)
	if st.Total != 6 || st.BySource["miss"] != 3 || st.ByType["image"] != 3 || st.ByTypeSource["document"]["fuzzy"] != 1 {
		t.Errorf("counts %+v", st)
	}
	if len(st.TopMissed) != 2 || st.TopMissed[0].Key != "GET site.test/b.png" || st.TopMissed[0].Count != 2 || st.TopMissed[1].Count != 1 {
		t.Errorf("top missed %+v", st.TopMissed)
	}
	st.Spares = Spares(ix, lines)
	if len(st.Spares) != ix.Len()-2 || st.Spares[0].ID != "e000002" {
		t.Errorf("spares: %d (first %s), index %d", len(st.Spares), st.Spares[0].ID, ix.Len())
	}
	for _, s := range st.Spares {
		if s.ID == "e000016" {
			t.Error("excluded entry listed as spare")
		}
	}
	var sb strings.Builder
	st.Print(&sb, 1)
	out := sb.String()
	for _, want := range []string{"requests: 6", "miss", "50.0%", "GET site.test/b.png", "spares (recorded, never requested): 15"} {
		if !strings.Contains(out, want) {
			t.Errorf("print lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "GET site.test/a.png") {
		t.Errorf("top 1 printed more:\n%s", out)
	}
}

// TestCheck runs the self-check against a live proxy: every recorded exchange is asked
// once and answered from the recording.
func TestCheck(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	rep, err := Check(context.Background(), tp.addr, tp.ca, tp.b)
	if err != nil {
		t.Fatal(err)
	}
	// 18 exchanges: pages are the document GETs (13 distinct URLs, /cart and /dup twice),
	// then the 5 others; the duplicates of /cart and /dup are not asked again.
	if rep.Pages != 11 || rep.Requests != 16 || rep.Errors != 0 || rep.Counts.Total != 16 {
		t.Fatalf("report %+v", rep)
	}
	// Misses: /gone (unresolved revisit) and the excluded captcha page.
	if rep.Counts.BySource["exact"] != 14 || rep.Counts.BySource["miss"] != 2 {
		t.Errorf("by source %v", rep.Counts.BySource)
	}
	var sb strings.Builder
	rep.Print(&sb)
	if !strings.Contains(sb.String(), "hit rate: exact 87.5%, search 0.0%, promo 0.0%, fuzzy 0.0%, together 87.5%") {
		t.Errorf("print:\n%s", sb.String())
	}
	lines := tp.logLines(t)
	if len(lines) != 16 {
		t.Errorf("%d log lines", len(lines))
	}
}

// TestStatsSearchPromo: the search and promo sources are counted, printed in lookup order
// and counted as answered from the recording; rule and endpoint survive ReadLog.
func TestStatsSearchPromo(t *testing.T) {
	data := `{"method":"GET","url":"https://s.test/s?k=a","type":"document","source":"search","rule":"sites/s.yaml:12","endpoint":"search","status":200,"entry":"e000002"}
{"method":"POST","url":"https://s.test/cart/promo","type":"api","source":"promo","rule":"sites/s.yaml:31","endpoint":"promo","status":200,"entry":"e000012"}
{"method":"GET","url":"https://s.test/","type":"document","source":"exact","status":200,"entry":"e000001"}
{"method":"GET","url":"https://s.test/x","type":"document","source":"miss","status":404}
`
	lines, err := ReadLog(strings.NewReader(data), "log")
	if err != nil {
		t.Fatal(err)
	}
	if lines[0].Rule != "sites/s.yaml:12" || lines[0].Endpoint != "search" || lines[2].Rule != "" {
		t.Errorf("rule and endpoint: %+v", lines)
	}
	st := Summarize(lines)
	if st.BySource[SourceSearch] != 1 || st.BySource[SourcePromo] != 1 || st.ByTypeSource["api"][SourcePromo] != 1 {
		t.Errorf("counts %+v", st.Counts)
	}
	var sb strings.Builder
	st.Print(&sb, 5)
	out := sb.String()
	iExact, iSearch, iPromo, iMiss := strings.Index(out, "  exact"), strings.Index(out, "  search"), strings.Index(out, "  promo"), strings.Index(out, "  miss")
	if iExact < 0 || !(iExact < iSearch && iSearch < iPromo && iPromo < iMiss) {
		t.Errorf("sources not in lookup order:\n%s", out)
	}
	if !strings.Contains(out, "answered from the recording (exact, search, promo, fuzzy): 3, 75.0%") {
		t.Errorf("print:\n%s", out)
	}
	rep := &CheckReport{Counts: st.Counts}
	if rep.HitRate() != 0.75 {
		t.Errorf("HitRate = %v", rep.HitRate())
	}
}

func TestLogDest(t *testing.T) {
	for in, want := range map[string]string{
		"document": "document", "IFRAME": "iframe", " empty ": "empty", "": "",
		"document\r\nx": "", "a b": "", "<script>": "", strings.Repeat("a", 33): "",
	} {
		if got := logDest(in); got != want {
			t.Errorf("logDest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLogHeader: a replay told its recording's hash starts its log with one header line
// (issue 21); readers skip it and return it from Header; a header line anywhere but first
// is an unreadable line; a replay without a hash writes none.
func TestLogHeader(t *testing.T) {
	const hash = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	exs := []ex{{method: "GET", url: "https://site.test/", status: 200, resType: "document",
		header: []string{"Content-Type: text/plain"}, body: []byte("home")}}
	b := writeTestBundle(t, t.TempDir(), siteManifest(), exs)
	tp := startProxyBundle(t, b, nil, func(o *Options) { o.Recording, o.RecordingOf = hash, "recording" })
	tp.get(t, "https://site.test/", nil)
	tp.get(t, "https://site.test/", nil)
	tp.close(t)
	raw := tp.log.Bytes()
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	var h LogHeader
	if err := json.Unmarshal(first, &h); err != nil || h.Event != LogHeaderEvent || h.Recording != hash || h.RecordingOf != "recording" || h.Time == "" {
		t.Fatalf("first log line %s (%v), want the header naming %s", first, err, hash)
	}
	if n := bytes.Count(raw, []byte(`"event"`)); n != 1 {
		t.Errorf("%d header lines, want one per run", n)
	}
	sc := NewLogScanner(bytes.NewReader(raw))
	var lines int
	for sc.Scan() {
		if sc.Log() == nil {
			t.Errorf("line %d unreadable: %s", sc.Line(), sc.Problem())
		}
		lines++
	}
	if lines != 2 || sc.Header() == nil || sc.Header().Recording != hash {
		t.Errorf("scanner: %d request lines, header %+v; want 2 and the header", lines, sc.Header())
	}
	if got, err := ReadLog(bytes.NewReader(raw), "log"); err != nil || len(got) != 2 {
		t.Errorf("ReadLog: %d lines, %v", len(got), err)
	}
	// a header after a request line is not a header
	moved := append(append(bytes.Clone(raw[len(first)+1:]), first...), '\n')
	sc = NewLogScanner(bytes.NewReader(moved))
	var bad int
	for sc.Scan() {
		if sc.Log() == nil {
			bad++
		}
	}
	if bad != 1 || sc.Header() != nil {
		t.Errorf("header as last line: %d bad lines, header %+v; want 1 bad and no header", bad, sc.Header())
	}
	// no hash, no header
	tp2 := startProxyBundle(t, b, nil)
	tp2.get(t, "https://site.test/", nil)
	tp2.close(t)
	if bytes.Contains(tp2.log.Bytes(), []byte(LogHeaderEvent)) {
		t.Errorf("a replay without Recording wrote a header:\n%s", tp2.log.Bytes())
	}
}

// TestCheckSample: a bounded check sends the first page and evenly spaced others, says how
// many the whole recording holds, and the proxy answers each request sent; bounds at or
// above the recording's size send everything, as Check does.
func TestCheckSample(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	rep, err := CheckSample(context.Background(), tp.addr, tp.ca, tp.b, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pages != 3 || rep.Requests != 5 || rep.Errors != 0 || rep.Counts.Total != 5 {
		t.Fatalf("report %+v", rep)
	}
	// 11 distinct page URLs; the others are every exchange whose GET was not sent as a page
	if rep.Of == nil || rep.Of.Pages != 11 || rep.Of.Others != 18-3-1 {
		t.Fatalf("of %+v", rep.Of)
	}
	// evenly spaced: the first page, then every 11/3rd
	all, err := CheckSample(context.Background(), tp.addr, tp.ca, tp.b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []int{0, 3, 7} {
		if rep.PageResults[i].URL != all.PageResults[k].URL {
			t.Errorf("page %d: %s, want %s", i, rep.PageResults[i].URL, all.PageResults[k].URL)
		}
	}
	if all.Of != nil || all.Pages != 11 || all.Requests != 16 {
		t.Errorf("unbounded: %+v", all)
	}
	big, err := CheckSample(context.Background(), tp.addr, tp.ca, tp.b, 11, 5)
	if err != nil {
		t.Fatal(err)
	}
	if big.Of != nil || big.Requests != 16 {
		t.Errorf("bounds at the size: %+v", big)
	}
}

// TestSampleBundle: the bundle SampleBundle opens holds only the sample, and a check of all
// of it through a replay of it sends what CheckSample with the same bounds sends on the
// whole bundle (the same pages, as many others, every one answered), with the whole
// bundle's numbers in of; bounds at the bundle's size hold every entry and say nothing of.
func TestSampleBundle(t *testing.T) {
	tp := startProxy(t, siteManifest(), siteExchanges(), defaultTestRules)
	want, err := CheckSample(context.Background(), tp.addr, tp.ca, tp.b, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	sub, of, total, err := SampleBundle(tp.b.Dir, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if total != tp.b.Len() {
		t.Errorf("total %d, want %d", total, tp.b.Len())
	}
	if sub.Len() >= tp.b.Len() || len(sub.Pages) != 3 {
		t.Fatalf("sample holds %d of %d entries and %d pages", sub.Len(), tp.b.Len(), len(sub.Pages))
	}
	if of == nil || *of != *want.Of {
		t.Errorf("of %+v, want %+v", of, want.Of)
	}
	sp := startProxyBundle(t, sub, defaultTestRules)
	got, err := CheckSample(context.Background(), sp.addr, sp.ca, sub, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pages != want.Pages || got.Requests != want.Requests || got.Errors != 0 || !maps.Equal(got.Counts.BySource, want.Counts.BySource) {
		t.Fatalf("check of the sample %+v, want %+v", got, want)
	}
	for i := range want.PageResults {
		if got.PageResults[i] != want.PageResults[i] {
			t.Errorf("page %d: %+v, want %+v", i, got.PageResults[i], want.PageResults[i])
		}
	}
	whole, of, _, err := SampleBundle(tp.b.Dir, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if of != nil || whole.Len() != tp.b.Len() {
		t.Errorf("bounds above the size: %d of %d entries, of %+v", whole.Len(), tp.b.Len(), of)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		n, max int
		want   []int
	}{{5, 0, []int{0, 1, 2, 3, 4}}, {5, 9, []int{0, 1, 2, 3, 4}}, {10, 3, []int{0, 3, 6}}, {0, 3, []int{}}} {
		if got := spread(c.n, c.max); !slices.Equal(got, c.want) {
			t.Errorf("spread(%d, %d) = %v, want %v", c.n, c.max, got, c.want)
		}
	}
}
