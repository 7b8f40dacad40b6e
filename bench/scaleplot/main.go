// Command scaleplot draws the curves of a scale series (bench/scale.sh's scale.jsonl) as
// one PNG: six panels against the number of entries on a log scale (import time with the
// time zcat takes to read the same file, import peak RSS, cold and warm start to the first
// answer, the CPU of a warm start, RSS after it, and HTTPS and plain-HTTP CPU per request).
// It uses the standard library only (image/png, with a small built-in 5x7 bitmap font), so
// that bench/ needs no plotting dependency.
//
//	go run ./bench/scaleplot -in /tmp/pab-scale/scale.jsonl -out docs/scale.png
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
)

// row is one line of scale.jsonl (bench/scale.sh); only the fields plotted.
type row struct {
	Kind         string  `json:"kind"`
	N            int     `json:"n"`
	Label        string  `json:"label"`
	Seconds      float64 `json:"seconds"`
	PeakRSSBytes float64 `json:"peak_rss_bytes"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	RSSBytes     float64 `json:"rss_bytes"`
	CPUMsPerReq  float64 `json:"cpu_ms_per_req"`
	Failed       int     `json:"failed"`
}

// series is one curve: a name and a value per n (NaN: none).
type series struct {
	name string
	col  color.RGBA
	ys   map[int]float64
}

// panel is one chart.
type panel struct {
	title string
	ss    []series
}

func main() {
	in := flag.String("in", "/tmp/pab-scale/scale.jsonl", "scale.jsonl written by bench/scale.sh")
	out := flag.String("out", "scale.png", "PNG to write")
	title := flag.String("title", "PAB SCALE SERIES", "title line (upper case; the font has no lower case)")
	flag.Parse()
	rows, err := readRows(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	panels := buildPanels(rows)
	img := draw(panels, ns(rows), strings.ToUpper(*title))
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	if err := png.Encode(f, img); err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
}

// readRows reads scale.jsonl; a line that is not JSON is an error naming it.
func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

func ns(rows []row) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.N) {
			out = append(out, r.N)
		}
	}
	sort.Ints(out)
	return out
}

// median of the start rows of n with label, by field f.
func median(rows []row, n int, label string, f func(row) float64) float64 {
	var xs []float64
	for _, r := range rows {
		if r.Kind == "start" && r.N == n && r.Label == label && f(r) > 0 {
			xs = append(xs, f(r))
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	sort.Float64s(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

func first(rows []row, kind string, n int, label string, f func(row) float64) float64 {
	for _, r := range rows {
		if r.Kind == kind && r.N == n && (label == "" || r.Label == label) && r.Failed == 0 && f(r) > 0 {
			return f(r)
		}
	}
	return math.NaN()
}

var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	green  = color.RGBA{44, 160, 44, 255}
)

func buildPanels(rows []row) []panel {
	each := func(f func(n int) float64) map[int]float64 {
		m := map[int]float64{}
		for _, n := range ns(rows) {
			m[n] = f(n)
		}
		return m
	}
	secs := func(r row) float64 { return r.Seconds }
	mb := func(v float64) float64 { return v / (1 << 20) }
	return []panel{
		{"IMPORT S", []series{
			{"IMPORT", blue, each(func(n int) float64 { return first(rows, "import", n, "", secs) })},
			{"ZCAT", orange, each(func(n int) float64 { return first(rows, "zcat", n, "", secs) })},
		}},
		{"IMPORT PEAK RSS MB", []series{
			{"IMPORT", blue, each(func(n int) float64 {
				return mb(first(rows, "import", n, "", func(r row) float64 { return r.PeakRSSBytes }))
			})},
		}},
		{"START TO FIRST ANSWER S", []series{
			{"WARM", blue, each(func(n int) float64 { return median(rows, n, "warm", secs) })},
			{"COLD", orange, each(func(n int) float64 { return median(rows, n, "cold", secs) })},
		}},
		{"WARM START CPU S", []series{
			{"WARM", blue, each(func(n int) float64 { return median(rows, n, "warm", func(r row) float64 { return r.CPUSeconds }) })},
		}},
		{"RSS AFTER WARM START MB", []series{
			{"WARM", blue, each(func(n int) float64 { return mb(median(rows, n, "warm", func(r row) float64 { return r.RSSBytes })) })},
		}},
		{"CPU PER REQUEST US", []series{
			{"HTTPS", blue, each(func(n int) float64 {
				return 1000 * first(rows, "load", n, "https", func(r row) float64 { return r.CPUMsPerReq })
			})},
			{"HTTP", green, each(func(n int) float64 {
				return 1000 * first(rows, "load", n, "http", func(r row) float64 { return r.CPUMsPerReq })
			})},
		}},
	}
}

// Layout of the image, in pixels.
const (
	panelW, panelH = 420, 280
	cols           = 3
	marginL        = 60
	marginR        = 16
	marginT        = 28
	marginB        = 34
	titleH         = 30
)

func draw(panels []panel, xs []int, title string) *image.RGBA {
	rows := (len(panels) + cols - 1) / cols
	img := image.NewRGBA(image.Rect(0, 0, cols*panelW, titleH+rows*panelH))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	text(img, 10, 10, title, color.RGBA{0, 0, 0, 255}, 2)
	for i, p := range panels {
		x0, y0 := (i%cols)*panelW, titleH+(i/cols)*panelH
		drawPanel(img, image.Rect(x0, y0, x0+panelW, y0+panelH), p, xs)
	}
	return img
}

func drawPanel(img *image.RGBA, r image.Rectangle, p panel, xs []int) {
	black := color.RGBA{0, 0, 0, 255}
	grey := color.RGBA{220, 220, 220, 255}
	plot := image.Rect(r.Min.X+marginL, r.Min.Y+marginT, r.Max.X-marginR, r.Max.Y-marginB)
	text(img, r.Min.X+marginL, r.Min.Y+8, p.title, black, 1)
	if len(xs) == 0 {
		return
	}
	// x: log10 of n, from the smallest to the largest n
	lx0, lx1 := math.Log10(float64(xs[0])), math.Log10(float64(xs[len(xs)-1]))
	if lx1 == lx0 {
		lx1 = lx0 + 1
	}
	ymax := 0.0
	for _, s := range p.ss {
		for _, v := range s.ys {
			if !math.IsNaN(v) && v > ymax {
				ymax = v
			}
		}
	}
	ymax = niceCeil(ymax * 1.08)
	px := func(n int) int {
		return plot.Min.X + int(math.Round((math.Log10(float64(n))-lx0)/(lx1-lx0)*float64(plot.Dx())))
	}
	py := func(v float64) int {
		return plot.Max.Y - int(math.Round(v/ymax*float64(plot.Dy())))
	}
	for k := 0; k <= 4; k++ {
		v := ymax * float64(k) / 4
		y := py(v)
		line(img, plot.Min.X, y, plot.Max.X, y, grey)
		lbl := label(v)
		text(img, plot.Min.X-6-6*len(lbl), y-3, lbl, black, 1)
	}
	for _, n := range xs {
		x := px(n)
		line(img, x, plot.Min.Y, x, plot.Max.Y, grey)
		e := int(math.Round(math.Log10(float64(n))))
		lbl := fmt.Sprint(n)
		if math.Pow10(e) == float64(n) {
			lbl = fmt.Sprintf("1E%d", e)
		}
		text(img, x-3*len(lbl), plot.Max.Y+8, lbl, black, 1)
	}
	line(img, plot.Min.X, plot.Max.Y, plot.Max.X, plot.Max.Y, black)
	line(img, plot.Min.X, plot.Min.Y, plot.Min.X, plot.Max.Y, black)
	text(img, plot.Max.X-6*len("ENTRIES"), plot.Max.Y+20, "ENTRIES", black, 1)
	for si, s := range p.ss {
		var prevX, prevY int
		have := false
		for _, n := range xs {
			v, ok := s.ys[n]
			if !ok || math.IsNaN(v) {
				have = false
				continue
			}
			x, y := px(n), py(v)
			if have {
				thick(img, prevX, prevY, x, y, s.col)
			}
			fill(img, image.Rect(x-3, y-3, x+4, y+4), s.col)
			prevX, prevY, have = x, y, true
		}
		// legend, top left inside the plot
		lx, ly := plot.Min.X+8, plot.Min.Y+6+12*si
		fill(img, image.Rect(lx, ly+1, lx+14, ly+5), s.col)
		text(img, lx+18, ly, s.name, black, 1)
	}
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (v > 0), or 1 for v <= 0.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow10(int(math.Floor(math.Log10(v))))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// label renders an axis value briefly.
func label(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
	default:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
	}
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws a one-pixel line (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		if (image.Point{x0, y0}).In(img.Bounds()) {
			img.SetRGBA(x0, y0, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

// thick draws a line two pixels wide.
func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	line(img, x0, y0, x1, y1, c)
	line(img, x0, y0+1, x1, y1+1, c)
	line(img, x0+1, y0, x1+1, y1, c)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// text draws s (upper case, digits and a few signs; anything else as a blank) at x, y with
// the 5x7 font, each pixel scale x scale.
func text(img *image.RGBA, x, y int, s string, c color.RGBA, scale int) {
	for _, ch := range s {
		g, ok := font[ch]
		if ok {
			for row, bits := range g {
				for col := 0; col < 5; col++ {
					if bits&(1<<(4-col)) != 0 {
						fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
					}
				}
			}
		}
		x += 6 * scale
	}
}

// font is a 5x7 bitmap font: seven rows of five bits per glyph, the top row first.
var font = map[rune][7]byte{
	'0': {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},
	'1': {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},
	'2': {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},
	'3': {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},
	'4': {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},
	'5': {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},
	'6': {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},
	'7': {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
	'8': {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},
	'9': {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},
	'A': {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},
	'B': {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},
	'C': {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E},
	'D': {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C},
	'E': {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F},
	'F': {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},
	'G': {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F},
	'H': {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},
	'I': {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},
	'J': {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},
	'K': {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11},
	'L': {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},
	'M': {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11},
	'N': {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},
	'O': {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},
	'P': {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},
	'Q': {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D},
	'R': {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},
	'S': {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E},
	'T': {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},
	'U': {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E},
	'V': {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},
	'W': {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A},
	'X': {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},
	'Y': {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04},
	'Z': {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},
	'.': {0, 0, 0, 0, 0, 0x0C, 0x0C},
	',': {0, 0, 0, 0, 0x0C, 0x04, 0x08},
	'-': {0, 0, 0, 0x1F, 0, 0, 0},
	'+': {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0},
	'/': {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0},
	'(': {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02},
	')': {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},
	':': {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0},
	'=': {0, 0, 0x1F, 0, 0x1F, 0, 0},
	'%': {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03},
}
