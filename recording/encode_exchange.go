package recording

import (
	"bytes"
	"fmt"

	"github.com/pab-dev/pab/warc"
)

// EncodeExchange returns x as two whole WARC 1.1 records, its response record then its
// request record (WARC 1.1 sections 6.4 and 6.5; the request is WARC-Concurrent-To the
// response), encoded exactly as BundleWriter.Add encodes a stored exchange: the same
// removed and redacted HTTP fields, digests, Content-Length and record ids derived from id
// and the content. id becomes RR-Exchange-ID; extra fields are added to the response
// record's header after pab's own. Revisits are the bundle writer's business: x must not
// set RevisitOf or Unresolved, and a payload is always stored whole. It also returns the
// warnings about HTTP header fields left out (see BundleWriter.Warnings). Errors are
// BundleWriter.Add's for bad input: a URL that is not absolute, no date, a status out of
// range, a bad method, an HTTP head over MaxHTTPHeaderBytes, a WARC header over
// MaxWARCHeaderBytes (ErrHeaderTooLarge).
func EncodeExchange(x Exchange, id string, extra []warc.Field) ([]byte, []string, error) {
	if x.RevisitOf != "" || x.Unresolved != nil {
		return nil, nil, fmt.Errorf("exchange %s (%s): EncodeExchange writes no revisits", id, x.URL)
	}
	// A writer with no bundle: it holds no payloads to revisit, and collects the warnings.
	var w BundleWriter
	a, err := w.checkExchange(x, id)
	if err != nil {
		return nil, nil, err
	}
	if err := a.buildHeads(&w); err != nil {
		return nil, nil, err
	}
	if err := a.digestPayload(&w); err != nil {
		return nil, nil, err
	}
	resp, req, err := a.recordFields(extra)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if _, err := warc.EncodeRecord(&out, resp, a.head.Bytes(), a.payload, a.payloadLen); err != nil {
		return nil, nil, fmt.Errorf("exchange %s (%s): %w", id, x.URL, err)
	}
	warc.EncodeRecord(&out, req, a.qblock.Bytes(), nil, 0) //nolint:errcheck // a bytes.Buffer does not fail
	return out.Bytes(), w.warnings, nil
}
