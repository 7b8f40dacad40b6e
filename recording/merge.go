package recording

// This file merges two bundles into one (`pab import` into a task that already has a
// recording, and `pab record` adding to one). The result is written afresh through
// BundleWriter, so exchange ids, offsets, revisit records and digests are those of a bundle
// written in one go.

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/iobuf"
	"github.com/pab-dev/pab/warc"
)

// MergeOptions tune Merge.
type MergeOptions struct {
	// PreferNew drops every exchange of the old bundle whose identity (see ExchangeIdentity)
	// occurs in the new bundle, so the new copies answer those requests.
	PreferNew bool
	// TaskID, when set, becomes the manifest's task_id; else the new bundle's, else the old's.
	TaskID string
	// Locale and Timezone, when set, become the manifest's locale and timezone (pab import
	// --locale, --timezone); else the new bundle's when set, else the old's.
	Locale, Timezone string
	// Context, when set, stops the merge between exchanges; nothing is written then.
	Context context.Context
}

// ExchangeIdentity is what makes two recorded exchanges "the same request" for Merge: the
// method, the URL exactly as recorded, and the lowercase hex sha256 of the request body,
// separated by spaces ("GET https://example.com/a e3b0c442..."). Rules are not applied:
// two URLs that replay would match to the same key but differ in a volatile parameter are
// different requests here.
func ExchangeIdentity(method, url string, body []byte) string {
	sum := sha256.Sum256(body)
	return method + " " + url + " " + hex.EncodeToString(sum[:])
}

// Merge writes to outDir (replaced as a whole on success, see NewBundleWriter) a bundle
// holding the exchanges of the bundles oldDir and newDir. oldDir may be "": the result is
// then newDir written afresh (its legacy manifest field start_url dropped).
//
// Order and precedence. The two recordings are placed one after the other, each in its own
// order: the one captured first (the earlier manifest captured_from; the old one when equal
// or unknown) comes first. Every exchange of both is kept, so replay, which answers a
// request from the earliest copy of its key and a "latest" page from the last copy
// (docs/rules.md), answers requests recorded both times from the earlier recording and
// latest pages from the later one. With PreferNew, old exchanges whose ExchangeIdentity
// occurs in the new bundle are dropped first, so the new copies answer everything recorded
// again. Pages follow the same order (PreferNew drops nothing from them).
//
// Manifest: task_id as MergeOptions.TaskID says; captured_from is the earlier and
// captured_to the later of the two; not_found maps are combined (the new bundle's URL wins
// for a host in both); locale and timezone are the new bundle's when set, else the old's.
// Payloads are read with Bundle.Response (a revisit's body from its original) and streamed
// into the new archive (never held in memory whole), so identical payloads of DedupMinSize bytes or more are stored once again; a
// revisit whose original was missing stays unresolved.
func Merge(oldDir, newDir, outDir string, opts MergeOptions) error {
	nb, err := openLegacyBundle(newDir)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	defer nb.Close()
	var ob *Bundle
	if oldDir != "" {
		ob, err = openLegacyBundle(oldDir)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		defer ob.Close()
	}

	m := mergeManifests(ob, nb, opts.TaskID)
	if opts.Locale != "" {
		m.Locale = opts.Locale
	}
	if opts.Timezone != "" {
		m.Timezone = opts.Timezone
	}
	type source struct {
		b    *Bundle
		drop map[string]bool // identities left out
	}
	var sources []source
	if ob != nil {
		drop := map[string]bool{}
		if opts.PreferNew {
			for i := range nb.Entries {
				id, err := identityOf(nb, &nb.Entries[i])
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				drop[id] = true
			}
		}
		olds, news := source{ob, drop}, source{nb, nil}
		if capturedBefore(nb.Manifest.CapturedFrom, ob.Manifest.CapturedFrom) {
			sources = []source{news, olds}
		} else {
			sources = []source{olds, news}
		}
	} else {
		sources = []source{{nb, nil}}
	}

	w, err := NewBundleWriter(outDir, m)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	bundles := make([]*Bundle, len(sources))
	for i, s := range sources {
		bundles[i] = s.b
	}
	rv := newRevisitResolver(bundles)
	for si, s := range sources {
		for i := range s.b.Entries {
			if opts.Context != nil {
				if err := opts.Context.Err(); err != nil {
					w.Abort()
					return fmt.Errorf("merge: %w", err)
				}
			}
			e := &s.b.Entries[i]
			if s.drop != nil {
				id, err := identityOf(s.b, e)
				if err != nil {
					w.Abort()
					return fmt.Errorf("merge: %w", err)
				}
				if s.drop[id] {
					continue
				}
			}
			x, err := exchangeOf(s.b, e)
			if err != nil {
				w.Abort()
				return fmt.Errorf("merge: %w", err)
			}
			if x.Unresolved != nil {
				if err := rv.resolve(&x); err != nil {
					w.Abort()
					return fmt.Errorf("merge: %s entry %s: %w", s.b.Dir, e.ID, err)
				}
			}
			ne, err := w.Add(x)
			if err != nil {
				w.Abort()
				return fmt.Errorf("merge: %s entry %s: %w", s.b.Dir, e.ID, err)
			}
			rv.written(si, i, ne.ID)
		}
		pages, err := s.b.AllPages()
		if err != nil {
			w.Abort()
			return fmt.Errorf("merge: %w", err)
		}
		for _, p := range pages {
			if err := w.AddPage(p); err != nil {
				w.Abort()
				return fmt.Errorf("merge: %w", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

// capturedBefore reports whether RFC 3339 time a is strictly before b; an empty or
// unreadable time is never before anything.
func capturedBefore(a, b string) bool {
	ta, err1 := time.Parse(time.RFC3339Nano, a)
	tb, err2 := time.Parse(time.RFC3339Nano, b)
	return err1 == nil && err2 == nil && ta.Before(tb)
}

// mergeManifests combines the manifests as Merge describes; old may be nil.
func mergeManifests(old, nw *Bundle, taskID string) Manifest {
	m := nw.Manifest
	m.Format = 0
	if old != nil {
		o := old.Manifest
		if m.TaskID == "" {
			m.TaskID = o.TaskID
		}
		if o.CapturedFrom != "" && (m.CapturedFrom == "" || capturedBefore(o.CapturedFrom, m.CapturedFrom)) {
			m.CapturedFrom = o.CapturedFrom
		}
		if o.CapturedTo != "" && (m.CapturedTo == "" || capturedBefore(m.CapturedTo, o.CapturedTo)) {
			m.CapturedTo = o.CapturedTo
		}
		if len(o.NotFound) > 0 {
			nf := make(map[string]string, len(o.NotFound)+len(m.NotFound))
			for k, v := range o.NotFound {
				nf[k] = v
			}
			for k, v := range m.NotFound {
				nf[k] = v
			}
			m.NotFound = nf
		}
		if m.Locale == "" {
			m.Locale = o.Locale
		}
		if m.Timezone == "" {
			m.Timezone = o.Timezone
		}
	}
	if taskID != "" {
		m.TaskID = taskID
	}
	return m
}

func identityOf(b *Bundle, e *Entry) (string, error) {
	body, err := b.RequestBody(e)
	if err != nil {
		return "", err
	}
	return ExchangeIdentity(e.Method, e.URL, body), nil
}

// exchangeOf reads entry e of b back into the Exchange that would write it again.
func exchangeOf(b *Bundle, e *Entry) (Exchange, error) {
	path := filepath.Join(b.Dir, WARCFile)
	date, err := time.Parse(time.RFC3339Nano, e.TS)
	if err != nil {
		return Exchange{}, fmt.Errorf("%s: entry %s: ts %q is not an RFC 3339 time", filepath.Join(b.Dir, EntriesFile), e.ID, e.TS)
	}
	reqBody, err := b.RequestBody(e)
	if err != nil {
		return Exchange{}, err
	}
	x := Exchange{Method: e.Method, URL: e.URL, Date: date, ReqBody: reqBody, ResourceType: e.ResourceType, ReqHeader: http.Header{}}
	if e.ReqLength > 0 {
		lines, err := b.httpHeadAt(e.ReqOffset, e.ReqLength, "request")
		if err != nil {
			return Exchange{}, fmt.Errorf("read %s at offset %d (entry %s): %w", path, e.ReqOffset, e.ID, err)
		}
		for _, line := range lines[1:] {
			name, value, ok := strings.Cut(line, ":")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				continue
			}
			x.ReqHeader.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
		}
	}
	if e.ReqType != "" && x.ReqHeader.Get("Content-Type") == "" {
		x.ReqHeader.Set("Content-Type", e.ReqType)
	}

	wh, err := b.warcHeaderAt(e.RespOffset, e.RespLength)
	if err != nil {
		return Exchange{}, fmt.Errorf("read %s at offset %d (entry %s): %w", path, e.RespOffset, e.ID, err)
	}
	x.OrigEncoding = wh.Get(warc.HeaderOriginalContentEncoding)
	x.Protocols = wh.Values("WARC-Protocol")
	x.Truncated = wh.Get("WARC-Truncated")
	var resp *Response
	if e.Unresolved {
		resp, err = b.response(e, "revisit")
		if err != nil {
			return Exchange{}, err
		}
		u := &UnresolvedRevisit{TargetURI: wh.Get("WARC-Refers-To-Target-URI"), PayloadDigest: wh.Get("WARC-Payload-Digest")}
		if d := wh.Get("WARC-Refers-To-Date"); d != "" {
			if t, err := time.Parse(time.RFC3339Nano, d); err == nil {
				u.Date = t
			}
		}
		x.Unresolved = u
	} else {
		resp, err = b.Response(e)
		if err != nil {
			return Exchange{}, err
		}
		// streamed from data.warc by the writer, never read into memory whole
		ra, ok := resp.Body.(io.ReaderAt)
		if !ok {
			return Exchange{}, fmt.Errorf("read %s (entry %s) payload: not a section of the file", path, e.ID)
		}
		x.BodyAt, x.BodySize = ra, resp.Size
	}
	x.Status, x.Proto, x.RespHeader = resp.Status, resp.Proto, resp.Header
	return x, nil
}

// warcHeaderAt reads the WARC header fields of the record at [off, off+length).
func (b *Bundle) warcHeaderAt(off, length int64) (warc.Fields, error) {
	rec, err := b.record(off, length)
	if err != nil {
		return nil, err
	}
	return rec.fields, nil
}

// httpHeadAt reads the HTTP head (first line and header lines) of the record of type typ
// at [off, off+length).
func (b *Bundle) httpHeadAt(off, length int64, typ string) ([]string, error) {
	rec, err := b.record(off, length)
	if err != nil {
		return nil, err
	}
	if rec.typ != typ {
		return nil, fmt.Errorf("WARC-Type is %q, want %q", rec.typ, typ)
	}
	lines, _, err := warc.ReadHeadLines(io.NewSectionReader(b.warc, rec.blockOff, rec.blockLen), warc.MaxHTTPHeaderBytes, true)
	if err != nil {
		return nil, fmt.Errorf("http header: %w", err)
	}
	return lines, nil
}

// openLegacyBundle is OpenBundle for a bundle whose manifest may still carry the legacy
// field start_url, which is dropped.
func openLegacyBundle(dir string) (*Bundle, error) {
	data, err := readAuditFile(dir, ManifestFile, MaxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	m, err := readLegacyManifest(data, filepath.Join(dir, ManifestFile), false)
	if err != nil {
		return nil, err
	}
	// the remaining files are read exactly as OpenBundle reads them
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	return openBundleRest(root, &Bundle{Dir: dir, Manifest: m})
}

// revisitResolver finds, for an unresolved revisit of one merged bundle, its original among
// the stored payloads of all of them (bundle-format.md, "Merging recordings"): by
// WARC-Refers-To-Target-URI and WARC-Refers-To-Date (the original's url and ts), else by
// the revisit's WARC-Payload-Digest (sha256 against the entries' digest; another algorithm
// against a digest of each stored payload, computed once, on first need).
type revisitResolver struct {
	bundles []*Bundle
	byURLTS map[string]storedRef
	byKey   map[string]storedRef // digest Key() of stored payloads; sha256 always
	hashed  bool                 // byKey holds sha1 (and other) digests too
	newID   map[storedRef]string // ids in the merged bundle of the entries written so far
}

// storedRef names entry i of bundle b (indexes into revisitResolver.bundles and Entries).
type storedRef struct{ b, i int }

func newRevisitResolver(bundles []*Bundle) *revisitResolver {
	r := &revisitResolver{bundles: bundles, byURLTS: map[string]storedRef{}, byKey: map[string]storedRef{}, newID: map[storedRef]string{}}
	for bi, b := range bundles {
		for i := range b.Entries {
			e := &b.Entries[i]
			if e.RevisitOf != "" || e.Unresolved {
				continue
			}
			ref := storedRef{bi, i}
			if _, ok := r.byURLTS[e.URL+" "+e.TS]; !ok {
				r.byURLTS[e.URL+" "+e.TS] = ref
			}
			if e.Digest != "" {
				if _, ok := r.byKey["sha256:"+e.Digest]; !ok {
					r.byKey["sha256:"+e.Digest] = ref
				}
			}
		}
	}
	return r
}

// written records the id entry i of bundle bi got in the merged bundle.
func (r *revisitResolver) written(bi, i int, id string) { r.newID[storedRef{bi, i}] = id }

// find returns the stored entry an unresolved revisit names, if any bundle holds it.
func (r *revisitResolver) find(u *UnresolvedRevisit) (storedRef, bool, error) {
	if u.TargetURI != "" && !u.Date.IsZero() {
		if ref, ok := r.byURLTS[u.TargetURI+" "+FormatTime(u.Date)]; ok {
			return ref, true, nil
		}
	}
	d, err := warc.ParseDigest(u.PayloadDigest)
	if err != nil {
		return storedRef{}, false, nil
	}
	if ref, ok := r.byKey[d.Key()]; ok {
		return ref, true, nil
	}
	if d.Algorithm == "sha256" || r.hashed {
		return storedRef{}, false, nil
	}
	r.hashed = true
	for bi, b := range r.bundles {
		for i := range b.Entries {
			e := &b.Entries[i]
			if e.RevisitOf != "" || e.Unresolved {
				continue
			}
			resp, err := b.Response(e)
			if err != nil {
				return storedRef{}, false, err
			}
			h := sha1.New()
			if _, err := iobuf.Copy(h, resp.Body); err != nil {
				return storedRef{}, false, fmt.Errorf("read %s (entry %s) payload: %w", filepath.Join(b.Dir, WARCFile), e.ID, err)
			}
			k := "sha1:" + hex.EncodeToString(h.Sum(nil))
			if _, ok := r.byKey[k]; !ok {
				r.byKey[k] = storedRef{bi, i}
			}
		}
	}
	ref, ok := r.byKey[d.Key()]
	return ref, ok, nil
}

// resolve turns the unresolved revisit x into a revisit of its original when one of the
// bundles stores it: a revisit of the original's new id once that is written, else (the
// original comes later, or was dropped) a copy of its payload. The status and header stay
// the revisit's own; its Content-Encoding is the original's when that payload is still
// encoded, and none otherwise. x is left as it is when no original is found.
func (r *revisitResolver) resolve(x *Exchange) error {
	ref, ok, err := r.find(x.Unresolved)
	if err != nil || !ok {
		return err
	}
	b := r.bundles[ref.b]
	oe := &b.Entries[ref.i]
	resp, err := b.Response(oe)
	if err != nil {
		return err
	}
	wh, err := b.warcHeaderAt(oe.RespOffset, oe.RespLength)
	if err != nil {
		return fmt.Errorf("read %s at offset %d (entry %s): %w", filepath.Join(b.Dir, WARCFile), oe.RespOffset, oe.ID, err)
	}
	x.Unresolved = nil
	x.OrigEncoding = wh.Get(warc.HeaderOriginalContentEncoding)
	h := cloneHeader(x.RespHeader)
	delHeader(h, "Content-Encoding")
	if ce := resp.Header.Values("Content-Encoding"); len(ce) > 0 && x.OrigEncoding == "" {
		h["Content-Encoding"] = ce
	}
	if len(x.RespHeader) == 0 {
		// a revisit stored without HTTP header fields: the original's answer
		x.Status, h = resp.Status, cloneHeader(resp.Header)
	}
	x.RespHeader = h
	if id, ok := r.newID[ref]; ok {
		x.RevisitOf = id
		return nil
	}
	ra, ok := resp.Body.(io.ReaderAt)
	if !ok {
		return fmt.Errorf("read %s (entry %s) payload: not a section of the file", filepath.Join(b.Dir, WARCFile), oe.ID)
	}
	x.BodyAt, x.BodySize, x.Truncated = ra, resp.Size, wh.Get("WARC-Truncated")
	return nil
}
