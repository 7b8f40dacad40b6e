package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/recording"
)

// PageURL is the page-load page of the recording (bench/pageload).
const PageURL = "https://www.bench.test/pl/index.html"

// writePage records the page-load page and its n subresources (same host: scripts, style
// sheets, PNG images) into w, and writes them to out/page (page.tsv, files/), the page
// first. It draws from its own random stream so the rest of the recording does not change.
func writePage(out string, w *recording.BundleWriter, n int, seed uint64, date time.Time) error {
	dir := filepath.Join(out, "page")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "page.tsv"))
	if err != nil {
		return err
	}
	defer f.Close()
	g := newGen(seed ^ 0x5eed5eed)
	const base = "https://www.bench.test/pl/"
	type res struct {
		url, ctype, rtype string
		body              []byte
	}
	var subs []res
	var head, body strings.Builder
	for i := 0; i < n; i++ {
		switch {
		case i%3 == 0: // scripts: a third
			u := fmt.Sprintf("%sjs/app-%02d.js", base, i)
			b := g.textBody(fmt.Sprintf("/* page script %d */\nwindow.plScripts = (window.plScripts || 0) + 1;\nvar pl%d = \"", i, i), "\";\n", 4000+g.r.IntN(20000))
			subs = append(subs, res{u, "application/javascript", "script", b})
			fmt.Fprintf(&body, "<script src=\"%s\"></script>\n", u)
		case i%5 == 1: // style sheets: a fifth
			u := fmt.Sprintf("%scss/style-%02d.css", base, i)
			b := g.textBody(fmt.Sprintf("/* page sheet %d */\n.pl%d { margin: 1px; }\n.pl%d::after { content: \"", i, i, i), "\"; }\n", 2000+g.r.IntN(8000))
			subs = append(subs, res{u, "text/css", "stylesheet", b})
			fmt.Fprintf(&head, "<link rel=\"stylesheet\" href=\"%s\">\n", u)
		default: // images: the rest
			u := fmt.Sprintf("%simg/pic-%02d.png", base, i)
			b, err := noisePNG(g.r, 2000+g.r.IntN(30000))
			if err != nil {
				return err
			}
			subs = append(subs, res{u, "image/png", "image", b})
			fmt.Fprintf(&body, "<img src=\"%s\" alt=\"picture %d\">\n", u, i)
		}
	}
	html := []byte("<!doctype html><html><head><meta charset=\"utf-8\"><title>Page load</title>\n<link rel=\"icon\" href=\"data:,\">\n" + head.String() +
		"</head><body><h1>Page load</h1>\n<p>" + string(g.textBody("", "", 3000)) + "</p>\n" + body.String() + "</body></html>\n")
	all := append([]res{{PageURL, "text/html; charset=utf-8", "document", html}}, subs...)
	for i, r := range all {
		x := recording.Exchange{
			Method: "GET", URL: r.url, Date: date.Add(time.Duration(i) * 10 * time.Millisecond),
			ReqHeader: http.Header{"User-Agent": {"pab-bench/1"}, "Accept": {"*/*"}},
			Status:    200, Proto: "HTTP/1.1",
			RespHeader: http.Header{"Content-Type": {r.ctype}, "Cache-Control": {"max-age=3600"},
				"Date": {date.Format(http.TimeFormat)}},
			Body: r.body, ResourceType: r.rtype,
		}
		if _, err := w.Add(x); err != nil {
			return err
		}
		if err := writeCycle(dir, f, r.url, r.ctype, r.body); err != nil {
			return err
		}
	}
	return w.AddPage(recording.Page{URL: PageURL, TS: recording.FormatTime(date), Fetched: "GET", Title: "Page load"})
}

// noisePNG is a real PNG image of random pixels, about size bytes (noise does not compress).
func noisePNG(r *rand.Rand, size int) ([]byte, error) {
	side := 1
	for (side+1)*(side+1)*3 <= size {
		side++
	}
	img := image.NewNRGBA(image.Rect(0, 0, side, side))
	for y := 0; y < side; y++ {
		for x := 0; x < side; x++ {
			v := r.Uint32()
			img.SetNRGBA(x, y, color.NRGBA{uint8(v), uint8(v >> 8), uint8(v >> 16), 255})
		}
	}
	var b bytes.Buffer
	err := png.Encode(&b, img)
	return b.Bytes(), err
}
