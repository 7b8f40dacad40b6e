package grade

// Parsing and comparing the values an LLM extracts from an agent's answer.
//
// The grader asks a model to copy fields (a price, a count, a yes/no) out of
// the agent's free-text answer, then compares them with the expected values
// of grading.yaml here, deterministically. Money and numbers are copied as
// written ("1.299,00 €", "₹1,29,999"), so this file reads the separators and
// currency markers people actually write, and refuses (with an error) what it
// cannot read without guessing: two different amounts, a malformed number, an
// amount too large to be a price.

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/pab-dev/pab/internal/textcut"
)

// MaxValueInput is the largest input, in bytes, that ParseMoney, ParseNumber
// and ParseBool accept; longer inputs are an error, not a search.
const MaxValueInput = 4 << 10

// MaxAbsValue is the largest magnitude ParseMoney and ParseNumber return
// (1e15, below 2^53 so whole amounts stay exact); anything larger is an error.
const MaxAbsValue = 1e15

// Money is an amount with its currency as found in text.
type Money struct {
	// Amount is the value in units of Currency (dollars, not cents), negative
	// when the text has a minus sign ("-$5.00" is -5).
	Amount float64
	// Currency is an ISO 4217 code ("USD", "EUR", "GBP", "JPY", "CHF", "INR",
	// "CAD", "AUD", ...) when the text names one, "" when it names none.
	Currency string
}

// ParseMoney reads one amount of money from s, which may have words around it
// ("The price is £54.23.").
//
// The number is read as described for ParseNumber (separators, sign, scale
// words), with these additions for money:
//
//   - Currency markers directly before the number, optionally separated by one
//     space (normal, U+00A0 or U+202F): "$" (USD), "US$" (USD), "C$"/"CA$"
//     (CAD), "A$"/"AU$" (AUD), "NZ$", "HK$", "S$" (SGD), "R$" (BRL), "€" (EUR),
//     "£" (GBP), "¥" (JPY), "CN¥" (CNY), "₹", "Rs", "Rs." (INR), "Fr.", "SFr." (CHF), or an ISO code
//     of three upper-case letters from a fixed list ("USD 45", "EUR45").
//   - Currency markers directly after the number (after the scale word if
//     any), optionally after one space: the same symbols and codes, "¢", and
//     the words dollar(s), US dollar(s), buck(s) (USD), euro(s) (EUR),
//     pound(s) (GBP), yen (JPY), rupee(s) (INR), franc(s), Swiss franc(s)
//     (CHF), cent(s), in any case. "¢" and "cent(s)" divide by 100 ("99¢" is
//     0.99 USD, "50 cents" is 0.5 with no currency).
//   - A minus sign may also stand before the currency marker ("-$5.00").
//   - Scale words also include "k", "m", "mn", "b", "bn" (any case, whole
//     word or glued to the number: "$5k" is 5000, "€1.2bn" is 1.2e9).
//   - When a marker both before and after the number name a currency, they
//     must agree: a specific marker (an ISO code, "US$", "C$", "€", "₹", ...)
//     wins over a generic one of the same family ("$12.50 CAD" is CAD, "$"
//     and "dollars" being dollar-family, "¥" yen-family, "£" pound-family);
//     "€45 USD" is an error.
//
// Every number in s that is not part of a word ("iPhone15", "COVID-19",
// "2nd" are skipped) counts as an amount. The same amount may appear more
// than once ("$45 (45 dollars)"), and a number without currency merges with
// an equal amount that has one; more than one distinct amount ("was $60, now
// $45", "2 nights for $90") is an error, as is an amount in two currencies.
//
// Errors: s over MaxValueInput bytes or not valid UTF-8; no amount found (so
// "free" is an error, not 0: the caller decides what "free" means); a
// malformed number ("1.2.3", "12,34.5"); more than one amount; conflicting
// currencies; a magnitude over MaxAbsValue. Error messages quote s (cut to
// about 80 bytes).
func ParseMoney(s string) (Money, error) {
	toks, err := mvScan("ParseMoney", s, true)
	if err != nil {
		return Money{}, err
	}
	// Distinct (amount, currency) pairs; one without currency drops out when
	// an equal amount with a currency is present.
	var uniq []mvToken
	for _, t := range toks {
		dup := false
		for _, u := range uniq {
			if u.value == t.value && u.cur == t.cur {
				dup = true
				break
			}
		}
		if !dup {
			uniq = append(uniq, t)
		}
	}
	var keep []mvToken
	for _, t := range uniq {
		if t.cur == "" {
			covered := false
			for _, u := range uniq {
				if u.cur != "" && u.value == t.value {
					covered = true
					break
				}
			}
			if covered {
				continue
			}
		}
		keep = append(keep, t)
	}
	switch {
	case len(keep) == 0:
		return Money{}, mvErr("ParseMoney", s, "no amount found")
	case len(keep) > 1:
		return Money{}, mvErr("ParseMoney", s, "more than one amount (%q and %q)", keep[0].text, keep[1].text)
	}
	return Money{Amount: keep[0].value, Currency: keep[0].cur}, nil
}

// ParseNumber reads one number from s, which may have words around it
// ("approximately 12", "8 jobs"). The result is finite, with magnitude at
// most MaxAbsValue.
//
// Rules, applied to the run of digits and separators that forms the number
// (digits are ASCII after Unicode NFKC, so full-width digits count):
//
//   - Sign: "-", "+" or "−" (U+2212) directly before the number, not after a
//     letter or digit ("10-20" is two numbers, "COVID-19" is a word).
//   - Space (any Unicode space, e.g. U+00A0, U+202F) and apostrophe (' or ’)
//     are only ever thousands separators. A space joins groups only as
//     "1-3 digits, then groups of exactly 3" and only before any other
//     separator ("1 299,00" is 1299, "1 2345" is two numbers).
//   - Both ',' and '.' present: the last one is the decimal separator and
//     must appear once; the other is the thousands separator ("1.299,5" is
//     1299.5, "1,299.00" is 1299).
//   - Only one of ',' and '.', appearing more than once: thousands
//     ("1,299,000"; Indian grouping "1,29,999" too).
//   - A single ',' or '.' followed by exactly 3 digits, with 1 to 3 digits
//     before it that are not all zero, and no space or apostrophe grouping:
//     thousands ("1,299" is 1299, "1.299" is 1299, "12.500" is 12500).
//     Otherwise a single ',' or '.' is the decimal separator ("54,23" is
//     54.23, "0.299" is 0.299, "1234.567" is 1234.567, ".5" is 0.5).
//   - Thousands groups are checked: the first has 1-3 digits, the last
//     exactly 3, the ones between all 3 (western) or all 2 (Indian, first
//     group then 1-2 digits). One number uses one thousands separator.
//     Anything else ("1.2.3", "12,34.5", "1,2345") is a malformed-number
//     error.
//   - A trailing "%" is allowed and ignored ("45%" is 45), as are unit words
//     ("8 jobs" is 8).
//   - Scale words after the number multiply it: thousand (1e3), lakh (1e5),
//     million (1e6), crore (1e7), billion (1e9), trillion (1e12), any case,
//     singular or plural ("1.5 million" is 1.5e6). Other letters glued to a
//     number make it part of a word, not a number ("5k", "2nd", "1e6").
//
// The same number may appear more than once; more than one distinct number
// ("3 to 5") is an error. Other errors: s over MaxValueInput bytes or not
// valid UTF-8, no number, malformed number, magnitude over MaxAbsValue.
func ParseNumber(s string) (float64, error) {
	toks, err := mvScan("ParseNumber", s, false)
	if err != nil {
		return 0, err
	}
	if len(toks) == 0 {
		return 0, mvErr("ParseNumber", s, "no number found")
	}
	for _, t := range toks[1:] {
		if t.value != toks[0].value {
			return 0, mvErr("ParseNumber", s, "more than one number (%q and %q)", toks[0].text, t.text)
		}
	}
	return toks[0].value, nil
}

// NormText normalizes text for comparison: invalid UTF-8 replaced by U+FFFD,
// Unicode NFKC, full case folding (so "Straße" and "STRASSE" agree), runs of
// white space (anything unicode.IsSpace accepts, including U+00A0 and U+202F)
// collapsed to one ASCII space, and trimmed. The result is valid UTF-8 and
// NormText(NormText(s)) == NormText(s).
func NormText(s string) string {
	t := strings.ToValidUTF8(s, "\uFFFD")
	// Folding and NFKC each can undo the other's normal form in rare cases;
	// repeat to a fixed point (in practice one or two rounds).
	for range 8 {
		u := mvCollapse(norm.NFKC.String(cases.Fold().String(norm.NFKC.String(t))))
		if u == t {
			break
		}
		t = u
	}
	return t
}

// mvCollapse turns each run of white space into one ASCII space and trims.
func mvCollapse(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// ParseBool reads a yes/no answer: after NormText and dropping one trailing
// "." or "!", "true", "yes", "y" and "1" are true, "false", "no", "n" and "0"
// are false. Anything else (including "maybe" or "yes, but") is an error.
func ParseBool(s string) (bool, error) {
	if len(s) > MaxValueInput {
		return false, mvErr("ParseBool", s, "input is %d bytes, more than %d", len(s), MaxValueInput)
	}
	t := NormText(s)
	t = strings.TrimSuffix(t, ".")
	t = strings.TrimSuffix(t, "!")
	switch t {
	case "true", "yes", "y", "1":
		return true, nil
	case "false", "no", "n", "0":
		return false, nil
	}
	return false, mvErr("ParseBool", s, "want true/false, yes/no, y/n or 1/0")
}

// NearlyEqual reports whether |a-b| <= tol. Equal values (including equal
// infinities) are nearly equal for any tol >= 0; a NaN argument or a
// negative tol reports false.
func NearlyEqual(a, b, tol float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsNaN(tol) || tol < 0 {
		return false
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= tol
}

// mvErr builds an error naming the function and the (cut) input.
func mvErr(fn, s, format string, args ...any) error {
	for i, a := range args {
		if t, ok := a.(string); ok {
			args[i] = mvCut(t)
		}
	}
	return fmt.Errorf("grade: %s %q: %s", fn, mvCut(s), fmt.Sprintf(format, args...))
}

// mvCut cuts s to about 80 bytes, on a rune boundary, for error messages.
func mvCut(s string) string {
	return textcut.Cut(s, 80, "...")
}

// mvToken is one number found in text.
type mvToken struct {
	value float64
	cur   string // ISO code, "" when none
	text  string // the number as written, for messages
}

// mvMarker is a currency marker or a scale word.
type mvMarker struct {
	text     []rune
	code     string // ISO code; "" for cents without a currency
	family   string // "dollar", "yen", ...: generic markers yield to a specific code of their family
	specific bool
	fold     bool // match ignoring case
	exp      int  // power of ten to apply (cents: -2, million: 6)
}

// mvISO lists the ISO 4217 codes recognized next to a number, with their
// family for agreeing with a generic symbol or word.
var mvISO = map[string]string{
	"USD": "dollar", "CAD": "dollar", "AUD": "dollar", "NZD": "dollar", "HKD": "dollar",
	"SGD": "dollar", "TWD": "dollar", "MXN": "dollar", "BRL": "dollar",
	"EUR": "euro", "GBP": "pound", "EGP": "pound", "JPY": "yen", "CNY": "yen",
	"INR": "rupee", "PKR": "rupee", "LKR": "rupee", "NPR": "rupee", "CHF": "franc",
	"SEK": "", "NOK": "", "DKK": "", "ISK": "", "PLN": "", "CZK": "", "HUF": "", "RON": "",
	"BGN": "", "RUB": "", "UAH": "", "TRY": "", "ILS": "", "AED": "", "SAR": "", "ZAR": "",
	"KRW": "", "THB": "", "IDR": "", "MYR": "", "PHP": "", "VND": "", "ARS": "", "CLP": "",
	"COP": "", "PEN": "", "NGN": "", "KES": "",
}

var (
	mvPrefix []mvMarker // currency markers before a number
	mvSuffix []mvMarker // currency markers after a number
	mvScaleN []mvMarker // scale words for numbers
	mvScaleM []mvMarker // scale words for money
)

func init() {
	sym := func(text, code, family string, specific bool) mvMarker {
		return mvMarker{text: []rune(text), code: code, family: family, specific: specific}
	}
	word := func(text, code, family string, exp int) mvMarker {
		return mvMarker{text: []rune(text), code: code, family: family, fold: true, exp: exp}
	}
	symbols := []mvMarker{
		sym("US$", "USD", "dollar", true), sym("CA$", "CAD", "dollar", true), sym("C$", "CAD", "dollar", true),
		sym("AU$", "AUD", "dollar", true), sym("A$", "AUD", "dollar", true), sym("NZ$", "NZD", "dollar", true),
		sym("HK$", "HKD", "dollar", true), sym("S$", "SGD", "dollar", true), sym("R$", "BRL", "dollar", true),
		sym("$", "USD", "dollar", false), sym("€", "EUR", "euro", true), sym("£", "GBP", "pound", false),
		sym("CN¥", "CNY", "yen", true), sym("JP¥", "JPY", "yen", true), sym("¥", "JPY", "yen", false),
		sym("₹", "INR", "rupee", true),
	}
	var codes []mvMarker
	for c, fam := range mvISO {
		codes = append(codes, sym(c, c, fam, true))
	}
	mvPrefix = append(mvPrefix, symbols...)
	mvPrefix = append(mvPrefix, codes...)
	mvPrefix = append(mvPrefix, sym("Rs.", "INR", "rupee", false), sym("Rs", "INR", "rupee", false),
		sym("SFr.", "CHF", "franc", true), sym("Fr.", "CHF", "franc", false))
	mvSuffix = append(mvSuffix, symbols...)
	mvSuffix = append(mvSuffix, codes...)
	cent := sym("¢", "USD", "dollar", false)
	cent.exp = -2
	mvSuffix = append(mvSuffix, cent)
	for _, w := range []struct{ texts, code, family string }{
		{"us dollars,us dollar,dollars,dollar,bucks,buck", "USD", "dollar"},
		{"euros,euro", "EUR", "euro"},
		{"pounds,pound", "GBP", "pound"},
		{"yen", "JPY", "yen"},
		{"rupees,rupee", "INR", "rupee"},
		{"swiss francs,swiss franc,francs,franc", "CHF", "franc"},
	} {
		for _, t := range strings.Split(w.texts, ",") {
			m := word(t, w.code, w.family, 0)
			m.specific = strings.HasPrefix(t, "us ") || strings.HasPrefix(t, "swiss ")
			mvSuffix = append(mvSuffix, m)
		}
	}
	mvSuffix = append(mvSuffix, word("cents", "", "", -2), word("cent", "", "", -2))
	for _, w := range []struct {
		texts string
		exp   int
	}{
		{"thousand,thousands", 3}, {"lakh,lakhs", 5}, {"million,millions", 6},
		{"crore,crores", 7}, {"billion,billions", 9}, {"trillion,trillions", 12},
	} {
		for _, t := range strings.Split(w.texts, ",") {
			mvScaleN = append(mvScaleN, word(t, "", "", w.exp))
		}
	}
	mvScaleM = append(mvScaleM, mvScaleN...)
	mvScaleM = append(mvScaleM, word("k", "", "", 3), word("m", "", "", 6), word("mn", "", "", 6),
		word("b", "", "", 9), word("bn", "", "", 9))
}

func mvIsDigit(r rune) bool  { return r >= '0' && r <= '9' }
func mvIsSign(r rune) bool   { return r == '-' || r == '+' || r == '\u2212' }
func mvIsLetter(r rune) bool { return unicode.IsLetter(r) }

// mvMatchAt reports the longest marker matching rs starting at b that ends at
// a word boundary (no letter or digit follows a marker ending in a letter).
func mvMatchAt(rs []rune, b int, ms []mvMarker) (mvMarker, int, bool) {
	var best mvMarker
	end := -1
	for _, m := range ms {
		e := b + len(m.text)
		if b < 0 || e > len(rs) || len(m.text) <= len(best.text) && end >= 0 {
			continue
		}
		ok := true
		for k, r := range m.text {
			c := rs[b+k]
			if m.fold {
				c = unicode.ToLower(c)
			}
			if c != r {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if mvIsLetter(m.text[len(m.text)-1]) && e < len(rs) && (mvIsLetter(rs[e]) || mvIsDigit(rs[e])) {
			continue
		}
		best, end = m, e
	}
	return best, end, end >= 0
}

// mvMatchBefore reports the longest marker of ms that ends at rs[e-1] and is
// not preceded by a letter; it returns the marker and its start.
func mvMatchBefore(rs []rune, e int, ms []mvMarker) (mvMarker, int, bool) {
	var best mvMarker
	start := -1
	for _, m := range ms {
		b := e - len(m.text)
		if b < 0 || e > len(rs) || len(m.text) <= len(best.text) && start >= 0 {
			continue
		}
		if string(rs[b:e]) != string(m.text) {
			continue
		}
		if b > 0 && mvIsLetter(rs[b-1]) {
			continue
		}
		best, start = m, b
	}
	return best, start, start >= 0
}

// mvScan finds the numbers of s. With money, currency markers and the short
// scale words count; tokens carry a resolved currency.
func mvScan(fn, s string, money bool) ([]mvToken, error) {
	rs, err := mvRunes(fn, s)
	if err != nil {
		return nil, err
	}
	n := len(rs)
	digitAt := func(i int) bool { return i >= 0 && i < n && mvIsDigit(rs[i]) }
	letterAt := func(i int) bool { return i >= 0 && i < n && mvIsLetter(rs[i]) }
	scales := mvScaleN
	if money {
		scales = mvScaleM
	}
	var toks []mvToken
	for i := 0; i < n; {
		if !digitAt(i) && !(rs[i] == '.' && digitAt(i+1) && !letterAt(i-1) && !digitAt(i-1)) {
			i++
			continue
		}
		j := mvTokenEnd(rs, i)
		raw := rs[i:j]
		start := i
		i = j

		// Left: sign, currency prefix, sign; or a glued letter (word).
		k := start - 1
		negative, signed := false, false
		if k >= 0 && mvIsSign(rs[k]) {
			switch {
			case rs[k] == '-' && letterAt(k-1):
				continue // "COVID-19"
			case digitAt(k - 1):
				// "10-20": a range, not a sign
			default:
				signed, negative = true, rs[k] != '+'
				k--
			}
		}
		var pre mvMarker
		hasPre := false
		if money {
			e := k + 1
			if m, b, ok := mvMatchBefore(rs, e, mvPrefix); ok {
				pre, hasPre, k = m, true, b-1
			} else if k >= 0 && rs[k] == ' ' {
				if m, b, ok := mvMatchBefore(rs, k, mvPrefix); ok {
					pre, hasPre, k = m, true, b-1
				}
			}
			if hasPre && !signed && k >= 0 && mvIsSign(rs[k]) && !letterAt(k-1) && !digitAt(k-1) {
				signed, negative = true, rs[k] != '+'
			}
		}
		if !hasPre && !signed && letterAt(start-1) {
			continue // "iPhone15"
		}

		// Right: scale word, currency suffix; or a glued letter (word).
		glued := letterAt(j) || (j < n && rs[j] == '-' && letterAt(j+1))
		gluedOK := false
		pos := j
		exp := 0
		var suf mvMarker
		hasSuf := false
		try := func(ms []mvMarker) (mvMarker, bool) {
			if m, e, ok := mvMatchAt(rs, pos, ms); ok {
				if pos == j {
					gluedOK = true
				}
				pos = e
				return m, true
			}
			if pos < n && rs[pos] == ' ' {
				if m, e, ok := mvMatchAt(rs, pos+1, ms); ok {
					pos = e
					return m, true
				}
			}
			return mvMarker{}, false
		}
		if m, ok := try(scales); ok {
			exp = m.exp
		}
		if money {
			suf, hasSuf = try(mvSuffix)
		}
		if glued && !gluedOK {
			continue // "2nd", "5-star"
		}

		canon, err := mvCanon(raw)
		if err != nil {
			return nil, mvErr(fn, s, "malformed number %q: %v", string(raw), err)
		}
		cur := ""
		if money {
			if cur, err = mvCurrency(fn, s, raw, pre, hasPre, suf, hasSuf); err != nil {
				return nil, err
			}
			exp += suf.exp
		}
		lit := canon
		if exp != 0 {
			lit += "e" + strconv.Itoa(exp)
		}
		v, err := strconv.ParseFloat(lit, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v > MaxAbsValue {
			return nil, mvErr(fn, s, "number %q out of range (magnitude above %g)", string(raw), MaxAbsValue)
		}
		if negative && v != 0 {
			v = -v
		}
		toks = append(toks, mvToken{value: v, cur: cur, text: strings.TrimSpace(string(rs[k+1 : pos]))})
	}
	return toks, nil
}

// mvRunes is s as mvScan reads it: NFKC-normalized runes with every space a plain ' '.
// Input over MaxValueInput bytes or not UTF-8 is an error (mvErr).
func mvRunes(fn, s string) ([]rune, error) {
	if len(s) > MaxValueInput {
		return nil, mvErr(fn, s, "input is %d bytes, more than %d", len(s), MaxValueInput)
	}
	if !utf8.ValidString(s) {
		return nil, mvErr(fn, s, "not valid UTF-8")
	}
	rs := []rune(norm.NFKC.String(s))
	for i, r := range rs {
		if unicode.IsSpace(r) {
			rs[i] = ' '
		}
	}
	return rs, nil
}

// mvCurrency is the currency of the number raw of s from its markers: the prefix pre, the
// suffix suf (each when has*), both when they agree (mvAgree; else an error), "" for none.
func mvCurrency(fn, s string, raw []rune, pre mvMarker, hasPre bool, suf mvMarker, hasSuf bool) (string, error) {
	switch {
	case hasPre && hasSuf:
		c, ok := mvAgree(pre, suf)
		if !ok {
			return "", mvErr(fn, s, "conflicting currencies %q and %q around %q", string(pre.text), string(suf.text), string(raw))
		}
		return c, nil
	case hasPre:
		return pre.code, nil
	case hasSuf:
		return suf.code, nil
	}
	return "", nil
}

// mvAgree resolves the currency of markers before and after one number.
func mvAgree(a, b mvMarker) (string, bool) {
	switch {
	case a.code == "" || b.code == "":
		return a.code + b.code, true
	case a.code == b.code:
		return a.code, true
	case a.specific && !b.specific && b.family != "" && mvISO[a.code] == b.family:
		return a.code, true
	case b.specific && !a.specific && a.family != "" && mvISO[b.code] == a.family:
		return b.code, true
	}
	return "", false
}

// mvTokenEnd returns the end of the number starting at rs[i] (a digit, or a
// '.' before a digit): digits joined by ',', '.', apostrophes and, before any
// of those, spaces followed by groups of exactly 3 digits.
func mvTokenEnd(rs []rune, i int) int {
	n := len(rs)
	digitAt := func(i int) bool { return i >= 0 && i < n && mvIsDigit(rs[i]) }
	j := i
	if rs[j] == '.' {
		j++
	}
	run := 0
	for digitAt(j) {
		j++
		run++
	}
	spaceOK := rs[i] != '.'
	for j < n {
		c := rs[j]
		switch {
		case (c == ',' || c == '.' || c == '\'' || c == '\u2019') && digitAt(j+1):
			k := j + 1
			for digitAt(k) {
				k++
			}
			run, j, spaceOK = k-j-1, k, false
		case c == ' ' && spaceOK && run >= 1 && run <= 3 && digitAt(j+1):
			k := j + 1
			for digitAt(k) {
				k++
			}
			if k-j-1 != 3 {
				return j
			}
			run, j = 3, k
		default:
			return j
		}
	}
	return j
}

// mvCanon turns a number as written (digits and separators, as delimited by
// mvTokenEnd) into a plain decimal literal for strconv.ParseFloat, applying
// the separator rules documented on ParseNumber.
func mvCanon(raw []rune) (string, error) {
	var runs []string
	var seps []rune
	cur := make([]rune, 0, len(raw))
	for _, r := range raw {
		if mvIsDigit(r) {
			cur = append(cur, r)
			continue
		}
		if r == '\u2019' {
			r = '\''
		}
		runs = append(runs, string(cur))
		cur = cur[:0]
		seps = append(seps, r)
	}
	runs = append(runs, string(cur))

	commas, dots, grouping := 0, 0, 0
	lastCD := -1
	for i, r := range seps {
		switch r {
		case ',':
			commas++
			lastCD = i
		case '.':
			dots++
			lastCD = i
		default:
			grouping++
		}
	}
	dec := -1 // index in seps of the decimal separator
	switch {
	case commas > 0 && dots > 0:
		d := seps[lastCD]
		if (d == ',' && commas > 1) || (d == '.' && dots > 1) {
			return "", fmt.Errorf("decimal separator %q appears more than once", d)
		}
		dec = lastCD
	case commas+dots == 1:
		before, after := runs[lastCD], runs[lastCD+1]
		if grouping == 0 && len(after) == 3 && len(before) >= 1 && len(before) <= 3 && strings.Trim(before, "0") != "" {
			dec = -1 // "1,299": thousands
		} else {
			dec = lastCD
		}
	}
	if dec >= 0 && dec != len(seps)-1 {
		return "", errors.New("thousands separator after the decimal separator")
	}
	groups := runs
	frac := ""
	if dec >= 0 {
		groups, frac = runs[:dec+1], runs[dec+1]
	}
	thousands := seps
	if dec >= 0 {
		thousands = seps[:dec]
	}
	for _, r := range thousands {
		if r != thousands[0] {
			return "", fmt.Errorf("mixed thousands separators %q and %q", thousands[0], r)
		}
	}
	if len(groups) > 1 {
		first, last := len(groups[0]), len(groups[len(groups)-1])
		if first < 1 || first > 3 || last != 3 {
			return "", errors.New("thousands groups must be 1-3 digits then groups of 3")
		}
		if mid := groups[1 : len(groups)-1]; len(mid) > 0 {
			w := len(mid[0])
			for _, g := range mid {
				if len(g) != w || (w != 2 && w != 3) {
					return "", errors.New("thousands groups must all have 3 digits (or 2, Indian style)")
				}
			}
			if w == 2 && first > 2 {
				return "", errors.New("Indian grouping starts with 1-2 digits")
			}
		}
	}
	whole := strings.Join(groups, "")
	if whole == "" {
		whole = "0"
	}
	if frac != "" {
		return whole + "." + frac, nil
	}
	return whole, nil
}
