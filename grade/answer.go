package grade

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/pab-dev/pab/internal/readlimit"
	"golang.org/x/net/html"
)

// MaxAnswerSize is the largest answer graded, in bytes: a larger answer is not shown to the
// judge and every item that needs the answer fails.
const MaxAnswerSize = 1 << 20

// Answer problems (AnswerInfo.Problem).
const (
	AnswerEmpty    = "empty"
	AnswerTooLarge = "too large"
	AnswerNotUTF8  = "not UTF-8"
	AnswerHTML     = "html"
)

// ReadAnswer reads an agent's answer file. An empty file, one over MaxAnswerSize, one that
// is not UTF-8 (invalid bytes become U+FFFD) or one written as HTML (reduced to its text)
// is not an error: the problem is recorded in the AnswerInfo. Only a missing or unreadable
// file, or one that is not a regular file, is an error.
func ReadAnswer(path string) (*AnswerInfo, error) {
	a, err := readAnswer(path)
	if err != nil {
		return nil, fmt.Errorf("answer: %w", err)
	}
	return a, nil
}

// readAnswer is ReadAnswer with errors not prefixed by "answer: ".
func readAnswer(path string) (*AnswerInfo, error) {
	f, err := readlimit.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxAnswerSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	a := AnswerFromBytes(data)
	a.File = path
	if fi.Size() > a.Bytes {
		a.Bytes = fi.Size()
	}
	return a, nil
}

// AnswerFromBytes makes an AnswerInfo from answer bytes, as ReadAnswer does.
func AnswerFromBytes(data []byte) *AnswerInfo {
	a := &AnswerInfo{Bytes: int64(len(data))}
	if len(data) > MaxAnswerSize {
		a.Problem = AnswerTooLarge
		return a
	}
	var problems []string
	if !utf8.Valid(data) {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
		problems = append(problems, AnswerNotUTF8)
	}
	text := strings.TrimPrefix(string(data), "\uFEFF")
	if looksLikeHTML(text) {
		text = htmlText(text)
		problems = append(problems, AnswerHTML)
	}
	text = strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	if text == "" {
		problems = append(problems, AnswerEmpty)
	}
	a.Text = text
	a.Problem = strings.Join(problems, ", ")
	return a
}

// looksLikeHTML reports whether an answer is an HTML document or fragment rather than
// text that mentions a tag: it starts with a doctype, <html, <body, <head, <div, <p or
// another opening tag and has a matching closing tag somewhere.
func looksLikeHTML(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	if strings.HasPrefix(t, "<!doctype html") || strings.HasPrefix(t, "<html") {
		return true
	}
	if !strings.HasPrefix(t, "<") || len(t) < 3 {
		return false
	}
	// An opening tag name, then its closing tag.
	end := strings.IndexAny(t[1:], " >/\n\t")
	if end <= 0 {
		return false
	}
	name := t[1 : 1+end]
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return strings.Contains(t, "</"+name+">")
}

// htmlText returns the visible text of an HTML document: text nodes outside script, style
// and template, with block elements on their own lines.
func htmlText(s string) string {
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return s
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "style", "template", "noscript", "head":
				return
			case "br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "table", "section", "article", "pre":
				b.WriteString("\n")
			case "td", "th":
				b.WriteString(" ")
			}
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	// Collapse runs of blank lines and trailing spaces.
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
