package grade

import (
	"reflect"
	"testing"

	"github.com/pab-dev/pab/replay"
)

func TestFrameSources(t *testing.T) {
	body := []byte(`<!doctype html><html><head><title>t</title>
<script>var s = '<iframe src="/in-script">';</script></head><body>
<!-- <iframe src="/in-comment"> -->
<iframe src="/a#top"></iframe><IFRAME SRC=" b.html "></IFRAME>
<iframe srcdoc="<p>x</p>"></iframe><iframe src="about:blank"></iframe><iframe src="javascript:void(0)"></iframe>
<frameset><frame src="HTTP://Other.TEST:80/f"></frameset>
<iframe src="https://x.test:443"></iframe></body></html>`)
	got := FrameSources(body, "http://site.test/dir/page")
	want := []string{"http://site.test/a", "http://site.test/dir/b.html", "http://other.test/f", "https://x.test/"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FrameSources = %q, want %q", got, want)
	}
	// the first <base href> moves every relative src
	got = FrameSources([]byte(`<base href="http://cdn.test/x/"><base href="http://no.test/"><iframe src="f">`), "http://site.test/")
	if want := []string{"http://cdn.test/x/f"}; !reflect.DeepEqual(got, want) {
		t.Errorf("with <base>: %q, want %q", got, want)
	}
}

// TestPagesOfFrames: on a plain-HTTP site (no Sec-Fetch-Dest), a document request for a frame
// of the page opened just before is that page's frame, not a page; a frame's frames too; a
// later top-level visit of the same URL, or a document that the page does not embed, is a page.
func TestPagesOfFrames(t *testing.T) {
	doc := func(url, entry string) replay.LogLine {
		return replay.LogLine{Method: "GET", URL: url, Type: "document", Source: "exact", Status: 200, Entry: entry}
	}
	lines := []replay.LogLine{
		doc("http://site.test/", "e1"), // a page with two frames
		{Method: "GET", URL: "http://site.test/a.png", Type: "image", Source: "exact", Status: 200},
		doc("http://site.test/frame", "e2"), // its frame, which has a frame
		doc("http://site.test/inner", "e3"), // the frame's frame
		doc("http://ads.test/ad", ""),       // its second frame (a miss)
		doc("http://site.test/next", "e4"),  // a link followed: a page
		doc("http://site.test/frame", "e2"), // opened as a page of its own
		{Method: "GET", URL: "https://s.test/", Type: "document", Dest: "iframe", Source: "miss", Status: 404}, // HTTPS frame
	}
	frames := map[string][]string{
		"e1": {"http://site.test/frame", "http://ads.test/ad"},
		"e2": {"http://site.test/inner"},
	}
	ps := pagesOf(lines, nil, nil, frames)
	var got []string
	for _, p := range ps.Opened {
		got = append(got, p.URL)
	}
	want := []string{"http://site.test/", "http://site.test/next", "http://site.test/frame"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pages %q, want %q", got, want)
	}
	// without frame information every plain-HTTP document counts
	if ps := pagesOf(lines, nil, nil, nil); len(ps.Opened) != 6 {
		t.Errorf("without frames: %d pages, want 6", len(ps.Opened))
	}
}
