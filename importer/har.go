package importer

// har.go: a HAR input of pab import (Chrome DevTools, Playwright's recordHar .har or .zip,
// mitmproxy) becomes a WARC file of request and response records in the import's work
// directory, which then goes through the same import as any WARC: audit, merge, stripping
// of cookies and credentials, inferred rules, self-check (docs/import.md "HAR files").

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/warc"
)

// HARReport counts what the conversion of one HAR input did.
type HARReport struct {
	// Name is the input as messages name it ("capture.har", "trace.zip!har.har").
	Name string
	// Entries is the number of entries read; Exchanges those turned into exchanges.
	Entries, Exchanges int
	// NotCaptured counts the exchanges whose response body (or POST body) the capture left
	// out: they are kept, and replay answers them as misses.
	NotCaptured int
	// Skipped counts entries not turned into exchanges, by reason ("no response (status
	// 0)": the request got no answer; "not http(s)": a data:, blob:, ws: ... URL;
	// "WebSocket": a 101 handshake).
	Skipped map[string]int
	// Locale is the first tag of the Accept-Language of the first navigation (a HAR page's
	// document, or a request with Sec-Fetch-Dest document or an Accept naming text/html),
	// "" when none is usable.
	Locale string
}

// notCapturedRef is the WARC-Refers-To of the revisit record a HAR response without its
// body becomes: it names no record, so the exchange is kept as an unresolved revisit,
// which replay answers as a miss (never as an empty 200).
const notCapturedRef = "<urn:pab:har:body-not-captured>"

// sniffHAR says whether the file at path is a HAR (a JSON object whose first key is "log")
// or a ZIP holding one (Playwright's .zip HAR); a WACZ (a ZIP with no .har member) is
// left to the WARC import. It reads the first 512 bytes.
func sniffHAR(path string) (isHAR, isZip bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if har.Sniff(head) {
		return true, false, nil
	}
	if har.IsZip(head) && !strings.HasSuffix(strings.ToLower(path), ".wacz") {
		z, err := har.OpenZip(path)
		if err != nil {
			return false, false, nil // not a HAR zip: the WARC import says what it is
		}
		z.Close()
		return true, true, nil
	}
	return false, false, nil
}

// harInputs converts each HAR input of paths into a WARC file under dir and returns the
// paths to import in their place, with a report per HAR. A HAR that cannot be read is an
// error naming the file and the entry index; nothing is left under dir on error but what
// the caller's work directory removes.
func harInputs(paths []string, dir string, warn func(string)) ([]string, []*HARReport, error) {
	out := make([]string, 0, len(paths))
	var reps []*HARReport
	for i, p := range paths {
		isHAR, isZip, err := sniffHAR(p)
		if err != nil {
			return nil, nil, fmt.Errorf("import: %w", err)
		}
		if !isHAR {
			out = append(out, p)
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("import: %w", err)
		}
		dst := filepath.Join(dir, fmt.Sprintf("%03d-%s.warc", i, safeBase(p)))
		rep, err := convertHAR(p, isZip, dst, warn)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, dst)
		reps = append(reps, rep)
	}
	return out, reps, nil
}

func safeBase(p string) string {
	b := []byte(filepath.Base(p))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// convertHAR writes the HAR at path (a .zip HAR when isZip) as WARC records to dst.
func convertHAR(path string, isZip bool, dst string, warn func(string)) (*HARReport, error) {
	rep := &HARReport{Name: path, Skipped: map[string]int{}}
	var src io.ReadCloser
	var att har.Attachments
	if isZip {
		z, err := har.OpenZip(path)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		defer z.Close()
		rep.Name = z.HARName()
		if src, err = z.OpenHAR(); err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		att = z
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		src = f
		d, err := har.NewDirAttachments(filepath.Dir(path))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("import: %w", err)
		}
		defer d.Close()
		att = d
	}
	defer src.Close()
	hr, err := har.NewReader(src, har.Limits{MaxText: maxHARText})
	if err != nil {
		return nil, fmt.Errorf("import: read %s: %w", rep.Name, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 64<<10)
	c := &harConv{rep: rep, att: att, w: bw, warn: warn, docSeen: map[string]bool{}}
	for {
		e, err := hr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("import: read %s: %w", rep.Name, err)
		}
		rep.Entries++
		if err := c.entry(e); err != nil {
			return nil, fmt.Errorf("import: read %s: entry %d (%s %.200s): %w", rep.Name, e.Index, e.Request.Method, e.Request.URL, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if rep.Exchanges == 0 {
		return nil, fmt.Errorf("import: read %s: no entry with an HTTP response (%d entries)", rep.Name, rep.Entries)
	}
	return rep, nil
}

// maxHARText bounds one string of a HAR, a body's text as written (base64 or not):
// har.DefaultMaxText (128 MiB), held in memory while its entry is converted.
const maxHARText = har.DefaultMaxText

type harConv struct {
	rep     *HARReport
	att     har.Attachments
	w       io.Writer
	warn    func(string)
	docSeen map[string]bool // pagerefs whose document was found
}

// entry writes one HAR entry as a response (or revisit) record and its request record.
func (c *harConv) entry(e *har.Entry) error {
	u, err := url.Parse(e.Request.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		c.rep.Skipped["not http(s)"]++
		return nil
	}
	if e.Response.Status == 0 {
		// Chromium writes requests that got no answer (blocked, cancelled, failed) with
		// status 0: there is nothing to replay.
		c.rep.Skipped["no response (status 0)"]++
		return nil
	}
	if e.Response.Status == http.StatusSwitchingProtocols {
		// a WebSocket handshake (DevTools keeps its messages in _webSocketMessages): pab
		// replays no WebSockets
		c.rep.Skipped["WebSocket"]++
		return nil
	}
	if e.Response.Status < 100 {
		return fmt.Errorf("response.status %d is not an HTTP status (100 to 999)", e.Response.Status)
	}
	started, _ := e.Started()
	date := started.UTC().Format("2006-01-02T15:04:05.000000000Z")
	method := strings.ToUpper(e.Request.Method)
	if !validToken(method) {
		return fmt.Errorf("request.method %q is not an HTTP method", e.Request.Method)
	}

	// the request
	qh, err := c.headers(e, "request", e.Request.Headers)
	if err != nil {
		return err
	}
	if len(qh.Values("Host")) == 0 {
		host := u.Host
		if a := pseudo(e.Request.Headers, ":authority"); a != "" {
			host = a
		}
		qh.Set("Host", host)
	}
	qh.Del("Transfer-Encoding")
	reqBody, reqNotCaptured, err := c.requestBody(e, qh)
	if err != nil {
		return err
	}
	if reqBody != nil || qh.Get("Content-Length") != "" {
		qh.Set("Content-Length", strconv.Itoa(len(reqBody)))
	}
	// the page list: the first HTML answer of each HAR page is its document
	resType := strings.ToLower(e.ResourceType)
	mime := e.Response.Content.MimeType
	if ct := headerValue(e.Response.Headers, "content-type"); ct != "" {
		mime = ct
	}
	if e.Pageref != "" && !c.docSeen[e.Pageref] && method == http.MethodGet && strings.HasPrefix(strings.ToLower(mime), "text/html") &&
		(resType == "" || resType == "document") && e.Response.Status >= 200 && e.Response.Status < 400 {
		c.docSeen[e.Pageref] = true
		if resType == "" {
			resType = "document"
		}
		if qh.Get("Sec-Fetch-Dest") == "" && !strings.Contains(strings.ToLower(qh.Get("Accept")), "text/html") {
			qh.Set("Sec-Fetch-Dest", "document") // what the HAR's pages say of it
		}
	}

	if c.rep.Locale == "" && (strings.EqualFold(qh.Get("Sec-Fetch-Dest"), "document") || strings.Contains(strings.ToLower(qh.Get("Accept")), "text/html")) {
		c.rep.Locale = firstLanguage(qh.Get("Accept-Language")) // the first navigation's
	}

	// the response
	rh, err := c.headers(e, "response", e.Response.Headers)
	if err != nil {
		return err
	}
	body, size, respNotCaptured, err := c.responseBody(e)
	if err != nil {
		return err
	}
	if body != nil {
		defer body.Close()
	}
	// HAR bodies are decoded: the stored body carries no content or transfer coding
	rh.Del("Content-Encoding")
	rh.Del("Transfer-Encoding")
	rh.Del("Content-Length")
	notCaptured := respNotCaptured || reqNotCaptured
	if !notCaptured {
		rh.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	proto := protocolOf(e.Response.HTTPVersion)
	if proto == "" {
		proto = protocolOf(e.Request.HTTPVersion)
	}
	status := e.Response.Status
	reason := e.Response.StatusText
	if reason == "" || strings.ContainsAny(reason, "\r\n") {
		reason = http.StatusText(status)
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\n", status, reason)
	rh.Write(&head)
	head.WriteString("\r\n")

	respID := fmt.Sprintf("<urn:pab:har:%s:%d:response>", shortHash(c.rep.Name), e.Index)
	fields := []warc.Field{
		{Name: "WARC-Type", Value: "response"},
		{Name: "WARC-Record-ID", Value: respID},
		{Name: "WARC-Date", Value: date},
		{Name: "WARC-Target-URI", Value: u.String()},
		{Name: "Content-Type", Value: "application/http;msgtype=response"},
	}
	if proto != "" {
		fields = append(fields, warc.Field{Name: "WARC-Protocol", Value: proto})
	}
	if resType != "" {
		fields = append(fields, warc.Field{Name: warc.HeaderResourceType, Value: resType})
	}
	if notCaptured {
		what := "response body"
		if reqNotCaptured {
			what = "request body (postData)"
		}
		c.warn(fmt.Sprintf("%s: entry %d (%s %.200s): %s not captured; kept as such: replay answers it as a miss", c.rep.Name, e.Index, method, e.Request.URL, what))
		c.rep.NotCaptured++
		sum := sha256.Sum256([]byte(fmt.Sprintf("pab: body not captured: %s entry %d", c.rep.Name, e.Index)))
		fields[0].Value = "revisit"
		fields = append(fields,
			warc.Field{Name: "WARC-Profile", Value: "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"},
			warc.Field{Name: "WARC-Refers-To", Value: notCapturedRef},
			warc.Field{Name: "WARC-Payload-Digest", Value: "sha256:" + hex.EncodeToString(sum[:])},
			warc.Field{Name: "WARC-Truncated", Value: "unspecified"})
		if _, err := warc.EncodeRecord(c.w, fields, head.Bytes(), nil, 0); err != nil {
			return err
		}
	} else {
		var payload io.Reader = bytes.NewReader(nil)
		if body != nil {
			payload = body
		}
		if _, err := warc.EncodeRecord(c.w, fields, head.Bytes(), payload, size); err != nil {
			return err
		}
	}

	target := u.RequestURI()
	if u.Opaque != "" || target == "" {
		target = "/"
	}
	var qhead bytes.Buffer
	fmt.Fprintf(&qhead, "%s %s HTTP/1.1\r\n", method, target)
	qh.Write(&qhead)
	qhead.WriteString("\r\n")
	qfields := []warc.Field{
		{Name: "WARC-Type", Value: "request"},
		{Name: "WARC-Record-ID", Value: fmt.Sprintf("<urn:pab:har:%s:%d:request>", shortHash(c.rep.Name), e.Index)},
		{Name: "WARC-Date", Value: date},
		{Name: "WARC-Target-URI", Value: u.String()},
		{Name: "WARC-Concurrent-To", Value: respID},
		{Name: "Content-Type", Value: "application/http;msgtype=request"},
	}
	if proto != "" {
		qfields = append(qfields, warc.Field{Name: "WARC-Protocol", Value: proto})
	}
	if _, err := warc.EncodeRecord(c.w, qfields, qhead.Bytes(), bytes.NewReader(reqBody), int64(len(reqBody))); err != nil {
		return err
	}
	c.rep.Exchanges++
	return nil
}

// headers turns HAR header items into an http.Header: HTTP/2 and HTTP/3 pseudo-header
// fields (":method", ":status", ...) dropped, lower-case names canonicalised, names that
// are not HTTP tokens and values holding CR, LF or NUL refused with the entry and field.
func (c *harConv) headers(e *har.Entry, which string, hs []har.Header) (http.Header, error) {
	h := http.Header{}
	for i, f := range hs {
		if strings.HasPrefix(f.Name, ":") {
			continue
		}
		if !validToken(f.Name) {
			return nil, fmt.Errorf("%s.headers[%d].name %q is not an HTTP field name", which, i, trimmed(f.Name))
		}
		if strings.ContainsAny(f.Value, "\r\n\x00") {
			return nil, fmt.Errorf("%s.headers[%d] (%s): the value holds a CR, LF or NUL", which, i, f.Name)
		}
		h.Add(http.CanonicalHeaderKey(f.Name), f.Value)
	}
	return h, nil
}

// requestBody returns the request body of e and whether the capture left it out: a
// request that says it had a body (bodySize or Content-Length above 0) but has no
// postData, as Chromium writes some POSTs (playwright #27845).
func (c *harConv) requestBody(e *har.Entry, qh http.Header) ([]byte, bool, error) {
	pd := e.Request.PostData
	if pd == nil {
		n, _ := strconv.ParseInt(qh.Get("Content-Length"), 10, 64)
		if e.Request.BodySize > 0 || n > 0 {
			return nil, true, nil
		}
		return nil, false, nil
	}
	if pd.File != "" {
		rc, size, err := c.att.Open(pd.File)
		if err != nil {
			return nil, false, fmt.Errorf("request.postData._file: %w", err)
		}
		defer rc.Close()
		if size > recording.MaxRequestBodySize {
			return nil, false, fmt.Errorf("request.postData._file %s: %d bytes, more than the import's %d for a request body", pd.File, size, recording.MaxRequestBodySize)
		}
		b, err := io.ReadAll(io.LimitReader(rc, size))
		if err != nil {
			return nil, false, fmt.Errorf("request.postData._file %s: %w", pd.File, err)
		}
		return b, false, nil
	}
	b, err := pd.Body()
	if err != nil {
		return nil, false, fmt.Errorf("request.postData: %w", err)
	}
	if len(b) > recording.MaxRequestBodySize {
		return nil, false, fmt.Errorf("request.postData: %d bytes, more than the import's %d for a request body", len(b), recording.MaxRequestBodySize)
	}
	if len(b) == 0 && len(pd.Params) > 0 {
		// params of a multipart form without their text: the body cannot be rebuilt
		return nil, true, nil
	}
	if qh.Get("Content-Type") == "" && pd.MimeType != "" {
		qh.Set("Content-Type", pd.MimeType)
	}
	return b, false, nil
}

// responseBody returns the response body of e as a reader with its size, or says the
// capture left it out: no text and no attached file, while content.size, bodySize or
// _transferSize say there was a body. A redirect, a 204, 304 or a HEAD without text is a
// body of 0 bytes.
func (c *harConv) responseBody(e *har.Entry) (io.ReadCloser, int64, bool, error) {
	ct := &e.Response.Content
	switch {
	case ct.File != "":
		rc, size, err := c.att.Open(ct.File)
		if err != nil {
			return nil, 0, false, fmt.Errorf("response.content._file: %w", err)
		}
		return rc, size, false, nil
	case ct.HasText() && ct.Encoding == "":
		// the text itself, not a copy of it
		return io.NopCloser(strings.NewReader(ct.Text)), int64(len(ct.Text)), false, nil
	case ct.HasText():
		b, err := ct.Body()
		if err != nil {
			return nil, 0, false, fmt.Errorf("response.content: %w", err)
		}
		return io.NopCloser(bytes.NewReader(b)), int64(len(b)), false, nil
	}
	if e.Pab != nil && e.Pab.BodyNotCaptured {
		return nil, 0, true, nil // a HAR pab exported of a body not in its recording
	}
	st := e.Response.Status
	if st == 204 || st == 304 || (st >= 300 && st < 400 && st != 300) || strings.EqualFold(e.Request.Method, "HEAD") {
		return nil, 0, false, nil
	}
	head := e.Response.HeadersSize
	if head < 0 {
		head = 0
	}
	if ct.Size > 0 || e.Response.BodySize > 0 || e.Response.TransferSize > head {
		return nil, 0, true, nil
	}
	return nil, 0, false, nil
}

// pseudo returns the value of the pseudo-header field name (":authority") of hs.
func pseudo(hs []har.Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// headerValue returns the first value of the field name (any case) of hs.
func headerValue(hs []har.Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// protocolOf maps a HAR httpVersion to a WARC-Protocol value (WARC 1.1 section 5.15,
// ALPN names): "h2", "h3" or "http/1.1"; "" when unknown.
func protocolOf(v string) string {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "h2", "http/2", "http/2.0":
		return "h2"
	case "h3", "http/3", "http/3.0", "h3-29":
		return "h3"
	case "http/1.1":
		return "http/1.1"
	case "http/1.0":
		return "http/1.0"
	}
	return ""
}

// firstLanguage is the first tag of an Accept-Language value ("de-CH,de;q=0.9" gives
// "de-CH") when it is a BCP 47 tag pab accepts, else "".
func firstLanguage(v string) string {
	tag := strings.TrimSpace(strings.Split(strings.Split(v, ",")[0], ";")[0])
	if tag == "" || tag == "*" || recording.CheckLocale(tag) != nil {
		return ""
	}
	return tag
}

// validToken says whether s is an HTTP token (RFC 9110 section 5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func trimmed(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// harSummary is the line pab import prints for a HAR input.
func harSummary(r *HARReport) string {
	var sb strings.Builder
	entries := "entries"
	if r.Entries == 1 {
		entries = "entry"
	}
	fmt.Fprintf(&sb, "HAR %s: %d %s: %s", r.Name, r.Entries, entries, words.Count(r.Exchanges, "exchange"))
	if r.NotCaptured > 0 {
		fmt.Fprintf(&sb, " (%d with a body not captured: replayed as misses)", r.NotCaptured)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Skipped)) {
		fmt.Fprintf(&sb, ", %d skipped (%s)", r.Skipped[k], k)
	}
	return sb.String()
}

// harInputs converts the run's HAR inputs into WARC files in its work directory, prints a
// line per HAR, and returns the inputs to import and the locale: Options.Locale, else the
// Accept-Language of the first HAR's first navigation.
//
// The returned func rewrites the WARC import's warnings about a converted HAR: the
// temporary WARC's name becomes the HAR's ("capture.har (as WARC)"), and the warnings about
// the bodies not captured, already said per entry, are dropped.
func (r *run) harInputs() ([]string, string, func(*recording.ImportReport), error) {
	inputs, reps, err := harInputs(r.o.Inputs, filepath.Join(r.work, "har"), func(s string) {
		fmt.Fprintf(r.errOut, "%s: warning: %s\n", r.o.Command, s)
	})
	if err != nil {
		return nil, "", nil, err
	}
	fix := func(rep *recording.ImportReport) {
		if rep == nil || len(reps) == 0 {
			return
		}
		out := rep.Warnings[:0]
		for _, w := range rep.Warnings {
			conv := false
			for i, in := range inputs {
				if in != r.o.Inputs[i] && strings.HasPrefix(w, in+" ") {
					conv = true
					w = r.o.Inputs[i] + " (as WARC)" + strings.TrimPrefix(w, in)
				}
			}
			if conv && strings.Contains(w, ": original not in the input; kept as unresolved") {
				continue
			}
			out = append(out, w)
		}
		rep.Warnings = out
	}
	locale := r.o.Locale
	for _, rep := range reps {
		fmt.Fprintln(r.out, harSummary(rep))
		if locale == "" && rep.Locale != "" {
			locale = rep.Locale
			fmt.Fprintf(r.out, "locale %s, from the Accept-Language of the HAR's first page (--locale to set another)\n", locale)
		}
	}
	return inputs, locale, fix, nil
}
