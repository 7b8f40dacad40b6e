package replay

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestAnswerFields: an answer written from a recorded head's field list (answerFields) has
// the same header as one written from its map, for heads with and without Date and
// Content-Type, and an answer whose header was replaced (fields nil) is written from the map.
func TestAnswerFields(t *testing.T) {
	for _, h := range []http.Header{
		{},
		{"Content-Type": {"text/html"}, "Cache-Control": {"max-age=60"}, "Date": {"Mon, 01 Jun 2026 10:00:00 GMT"}},
		{"Set-Cookie": {"a=1", "b=2"}, "Etag": {`"x"`}},
		{"Date": {"Mon, 01 Jun 2026 10:00:00 GMT"}, "Vary": {"Accept", "Origin"}},
	} {
		r := httptest.NewRequest(http.MethodGet, "https://a.test/", nil)
		write := func(a *answer) http.Header {
			w := httptest.NewRecorder()
			if err := a.write(w, r); err != nil {
				t.Fatal(err)
			}
			return w.Header()
		}
		data := []byte("body")
		fromMap := write(&answer{status: 200, header: h, data: data, size: 4})
		fromList := write(&answer{status: 200, header: h, fields: answerFields(h), data: data, size: 4})
		if !reflect.DeepEqual(fromMap, fromList) {
			t.Errorf("header %v: from the list %v, from the map %v", h, fromList, fromMap)
		}
		for _, k := range []string{"Date", "Content-Type"} {
			if vs, ok := fromList[k]; !ok || (h[k] == nil) != (vs == nil) {
				t.Errorf("header %v: %s is %v, %v in the answer (a nil value keeps net/http from adding one)", h, k, vs, ok)
			}
		}
	}
}
