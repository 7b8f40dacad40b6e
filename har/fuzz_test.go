package har

import (
	"io"
	"strings"
	"testing"
)

// FuzzReader: any input either reads as entries that satisfy Next's checks or fails with
// an *Error; never a panic, and the bounds hold.
func FuzzReader(f *testing.F) {
	f.Add(harOf(entryJSON(0, "x"), entryJSON(1, "")))
	f.Add(`{"log":{"entries":[]}}`)
	f.Add(`{"log":{"pages":[{"id":"p"}],"entries":[{"request":{}}]}}`)
	f.Add(`{"log":{"entries":[{"startedDateTime":"2026-12-01T10:00:00Z","request":{"method":"POST","url":"http://a/","postData":{"mimeType":"application/x-www-form-urlencoded","params":[{"name":"a b","value":"c&d"}]}},"response":{"status":200,"content":{"text":"eA==","encoding":"base64"}}}]}}`)
	f.Fuzz(func(t *testing.T, data string) {
		hr, err := NewReader(strings.NewReader(data), Limits{MaxText: 1 << 10, MaxEntries: 50, MaxPages: 50, MaxDepth: 16})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for n := 0; ; n++ {
			e, err := hr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("error of type %T: %v", err, err)
				}
				return
			}
			if n > 50 || e.Index != n || e.Request.Method == "" || e.Request.URL == "" || len(e.Response.Content.Text) > 1<<10 {
				t.Fatalf("entry %d: %+v", n, e)
			}
			e.Response.Content.Body()
			if e.Request.PostData != nil {
				e.Request.PostData.Body()
			}
		}
	})
}
