// Package textcut shortens UTF-8 text on a character boundary: the one home of the cut that
// log lines, stats labels, grading results, inferred-rule comments and error messages use.
package textcut

import "unicode/utf8"

// Prefix returns the longest prefix of s of at most n bytes that does not end inside a
// UTF-8 sequence (s itself when it is not longer than n; "" for n <= 0).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Cut returns s when it is at most n bytes, else Prefix(s, n) followed by mark (so the
// result may be up to len(mark) bytes longer than n).
func Cut(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + mark
}

// Fit returns s when it is at most n bytes, else a prefix followed by mark that together
// are at most n bytes (mark alone, or less, when n is smaller than mark).
func Fit(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	if n < len(mark) {
		return Prefix(mark, n)
	}
	return Prefix(s, n-len(mark)) + mark
}
