package grade

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMoney(t *testing.T) {
	const nbsp, nnbsp = "\u00a0", "\u202f"
	cases := []struct {
		in     string
		amount float64
		cur    string
	}{
		{"$1,299.00", 1299, "USD"},
		{"1.299,00 €", 1299, "EUR"},
		{"USD 45", 45, "USD"},
		{"45 dollars", 45, "USD"},
		{"£54.23", 54.23, "GBP"},
		{"54.23 GBP", 54.23, "GBP"},
		{"€ 1 299,00", 1299, "EUR"},
		{"€" + nbsp + "1" + nbsp + "299,00", 1299, "EUR"},
		{"€" + nnbsp + "1" + nnbsp + "299,00", 1299, "EUR"},
		{"1 299,00 €", 1299, "EUR"},
		{"1" + nbsp + "299,00" + nbsp + "€", 1299, "EUR"},
		{"1" + nnbsp + "299,00" + nnbsp + "€", 1299, "EUR"},
		{"1'299.00 CHF", 1299, "CHF"},
		{"1’299.00 CHF", 1299, "CHF"},
		{"¥1,299", 1299, "JPY"},
		{"₹1,29,999", 129999, "INR"},
		{"₹12,34,56,789", 123456789, "INR"},
		{"US$ 12.50", 12.5, "USD"},
		{"US$12.50", 12.5, "USD"},
		{"12.50 USD", 12.5, "USD"},
		{"45 euros", 45, "EUR"},
		{"45 Euro", 45, "EUR"},
		{"45 EUR", 45, "EUR"},
		{"EUR 45,50", 45.5, "EUR"},
		{"EUR45", 45, "EUR"},
		{"45EUR", 45, "EUR"},
		{"-$5.00", -5, "USD"},
		{"$-5.00", -5, "USD"},
		{"−5 €", -5, "EUR"},
		{"$0.99", 0.99, "USD"},
		{"$.99", 0.99, "USD"},
		{"The price is £54.23.", 54.23, "GBP"},
		{"£54", 54, "GBP"},
		{"£54.", 54, "GBP"},
		{"54,23 €", 54.23, "EUR"},
		{"1.299 €", 1299, "EUR"},
		{"0.299 €", 0.299, "EUR"},
		{"C$ 20", 20, "CAD"},
		{"CA$20", 20, "CAD"},
		{"A$20", 20, "AUD"},
		{"AU$ 20", 20, "AUD"},
		{"NZ$20", 20, "NZD"},
		{"CN¥ 88", 88, "CNY"},
		{"$12.50 CAD", 12.5, "CAD"},
		{"$45 USD", 45, "USD"},
		{"45 US dollars", 45, "USD"},
		{"45 DOLLARS", 45, "USD"},
		{"1 dollar", 1, "USD"},
		{"10 pounds", 10, "GBP"},
		{"1000 yen", 1000, "JPY"},
		{"500 rupees", 500, "INR"},
		{"Rs. 1,29,999", 129999, "INR"},
		{"Rs 500", 500, "INR"},
		{"20 Swiss francs", 20, "CHF"},
		{"20 francs", 20, "CHF"},
		{"Fr. 20.50", 20.5, "CHF"},
		{"99¢", 0.99, "USD"},
		{"50 cents", 0.5, ""},
		{"$1.2 million", 1.2e6, "USD"},
		{"1.5 million dollars", 1.5e6, "USD"},
		{"$5k", 5000, "USD"},
		{"€1.2bn", 1.2e9, "EUR"},
		{"₹2 crore", 2e7, "INR"},
		{"45", 45, ""},
		{"It costs 45.", 45, ""},
		{"$45 (45 dollars)", 45, "USD"},
		{"$45, i.e. 45", 45, "USD"},
		{"Total: $45. Paid: $45.", 45, "USD"},
		{"the iPhone15 costs $799", 799, "USD"},
		{"a 5-star hotel at €120", 120, "EUR"},
		{"＄１２.５０", 12.5, "USD"},
		{"$0", 0, "USD"},
		{"-$0.00", 0, "USD"},
		{"1234.567 €", 1234.567, "EUR"},
		{"$1,234,567.89", 1234567.89, "USD"},
		{"1.234.567,89 €", 1234567.89, "EUR"},
		{"$ 1 234 567", 1234567, "USD"},
	}
	for _, c := range cases {
		m, err := ParseMoney(c.in)
		if err != nil {
			t.Errorf("ParseMoney(%q): %v", c.in, err)
			continue
		}
		if !NearlyEqual(m.Amount, c.amount, 1e-9) || m.Currency != c.cur {
			t.Errorf("ParseMoney(%q) = %v %q, want %v %q", c.in, m.Amount, m.Currency, c.amount, c.cur)
		}
		if math.Signbit(m.Amount) && m.Amount == 0 {
			t.Errorf("ParseMoney(%q) = negative zero", c.in)
		}
	}
}

func TestParseMoneyErrors(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"free", "no amount found"},
		{"", "no amount found"},
		{"USD", "no amount found"},
		{"54p", "no amount found"}, // a number glued to an unknown word is not an amount
		{"was $60, now $45", "more than one amount"},
		{"$45 or 45 EUR", "more than one amount"},
		{"2 nights for $90", "more than one amount"},
		{"$10-$20", "more than one amount"},
		{"€45 USD", "conflicting currencies"},
		{"£5 dollars", "conflicting currencies"},
		{"1.2.3 €", "malformed number"},
		{"$12,34.5", "malformed number"},
		{"$1,2345.00", "malformed number"},
		{"$1,234,56.00", "malformed number"},
		{"€1.299.00", "malformed number"},
		{"$1'234.567,00", "mixed thousands separators"},
		{"$" + strings.Repeat("9", 400), "out of range"},
		{"$2e15", "no amount found"},
		{"$2000000000000000", "out of range"},
		{strings.Repeat("a", MaxValueInput+1), "more than"},
		{"$4\xff5", "not valid UTF-8"},
	}
	for _, c := range cases {
		m, err := ParseMoney(c.in)
		if err == nil {
			t.Errorf("ParseMoney(%q) = %v, want error containing %q", c.in, m, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseMoney(%q) error %q, want it to contain %q", c.in, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "grade: ParseMoney ") {
			t.Errorf("ParseMoney(%q) error %q does not name the function", c.in, err)
		}
		if len(err.Error()) > 300 {
			t.Errorf("ParseMoney(%q) error is %d bytes; the input should be cut", c.in, len(err.Error()))
		}
	}
	if m, err := ParseMoney("$2000 trillion"); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("ParseMoney($2000 trillion) = %v, %v; want out of range (2e12 is fine, 2e15 is not)", m, err)
	}
	if _, err := ParseMoney("$2 trillion"); err != nil {
		t.Errorf("ParseMoney($2 trillion): %v", err)
	}
}

func TestParseNumber(t *testing.T) {
	cases := []struct {
		in   string
		want float64
	}{
		{"1,299", 1299},
		{"1.299,5", 1299.5},
		{"12", 12},
		{"-3.5", -3.5},
		{"+3.5", 3.5},
		{"−3.5", -3.5},
		{"45%", 45},
		{"45 percent", 45},
		{"approximately 12", 12},
		{"8 jobs", 8},
		{"0.299", 0.299},
		{"54,23", 54.23},
		{"1 299", 1299},
		{"1\u00a0299,5", 1299.5},
		{"1'000'000", 1e6},
		{"1,29,999", 129999},
		{".5", 0.5},
		{"1.5 million", 1.5e6},
		{"3 thousand", 3000},
		{"12 (twelve), i.e. 12", 12},
		{"COVID-19 cases: 7", 7},
		{"the 2nd of 3", 3},
		{"10", 10},
		{"0", 0},
		{"１２", 12},
	}
	for _, c := range cases {
		got, err := ParseNumber(c.in)
		if err != nil {
			t.Errorf("ParseNumber(%q): %v", c.in, err)
			continue
		}
		if !NearlyEqual(got, c.want, 1e-9) {
			t.Errorf("ParseNumber(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseNumberErrors(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"", "no number found"},
		{"twelve", "no number found"},
		{"5k", "no number found"},
		{"1e6", "no number found"},
		{"3 to 5", "more than one number"},
		{"10-20", "more than one number"},
		{"1, 2", "more than one number"},
		{"1 2345", "more than one number"},
		{"1.2.3", "malformed number"},
		{"12,34.5", "malformed number"},
		{strings.Repeat("9", 400), "out of range"},
		{strings.Repeat("1 ", 3000), "more than"},
		{"\xc3", "not valid UTF-8"},
	}
	for _, c := range cases {
		got, err := ParseNumber(c.in)
		if err == nil {
			t.Errorf("ParseNumber(%q) = %v, want error containing %q", c.in, got, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "grade: ParseNumber ") {
			t.Errorf("ParseNumber(%q) error %q, want it to contain %q", c.in, err, c.want)
		}
	}
	// The input is quoted, cut to about 80 bytes.
	long := strings.Repeat("x", 200) + " 1 2"
	_, err := ParseNumber(long)
	if err == nil || !strings.Contains(err.Error(), `"`+strings.Repeat("x", 80)+`..."`) || strings.Contains(err.Error(), strings.Repeat("x", 81)) {
		t.Errorf("ParseNumber(long) error %v; want the input cut to 80 bytes", err)
	}
}

func TestNormText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"  Hello   World  ", "hello world"},
		{"Hello\u00a0\u202fWorld", "hello world"},
		{"\tA\n\nB\r\n", "a b"},
		{"Straße", "strasse"},
		{"STRASSE", "strasse"},
		{"ﬁne", "fine"},       // NFKC ligature
		{"Ｆｕｌｌ", "full"},      // full-width
		{"e\u0301", "\u00e9"}, // composed
		{"\u212b", "\u00e5"},  // Angstrom sign
		{"bad\xffbyte", "bad\ufffdbyte"},
		{"", ""},
		{"   ", ""},
	}
	for _, c := range cases {
		if got := NormText(c.in); got != c.want {
			t.Errorf("NormText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseBool(t *testing.T) {
	for _, in := range []string{"true", "TRUE", " Yes ", "yes.", "Yes!", "y", "Y", "1", "ｙｅｓ"} {
		if b, err := ParseBool(in); err != nil || !b {
			t.Errorf("ParseBool(%q) = %v, %v; want true", in, b, err)
		}
	}
	for _, in := range []string{"false", "False", "no", "NO.", "n", "0", "\u00a0no\u00a0"} {
		if b, err := ParseBool(in); err != nil || b {
			t.Errorf("ParseBool(%q) = %v, %v; want false", in, b, err)
		}
	}
	for _, in := range []string{"", "maybe", "yes, but", "2", "nope", "yes..", strings.Repeat("y", MaxValueInput+1)} {
		if b, err := ParseBool(in); err == nil {
			t.Errorf("ParseBool(%q) = %v, want error", in, b)
		} else if !strings.HasPrefix(err.Error(), "grade: ParseBool ") {
			t.Errorf("ParseBool(%q) error %q does not name the function", in, err)
		}
	}
}

func TestNearlyEqual(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		a, b, tol float64
		want      bool
	}{
		{1, 1, 0, true},
		{1, 1.005, 0.01, true},
		{1.005, 1, 0.01, true},
		{1, 1.02, 0.01, false},
		{-1, 1, 2, true},
		{-1, 1, 1.999, false},
		{0.1 + 0.2, 0.3, 1e-12, true},
		{1, 1, -1, false},
		{inf, inf, 0, true},
		{inf, -inf, 1e300, false},
		{nan, nan, 1, false},
		{1, nan, 1, false},
		{1, 2, nan, false},
		{1, 2, inf, true},
	}
	for _, c := range cases {
		if got := NearlyEqual(c.a, c.b, c.tol); got != c.want {
			t.Errorf("NearlyEqual(%v, %v, %v) = %v, want %v", c.a, c.b, c.tol, got, c.want)
		}
	}
}

// TestParseMoneyRoundTrip checks that $%.2f of a non-negative x below 1e9
// reads back within half a cent.
func TestParseMoneyRoundTrip(t *testing.T) {
	xs := []float64{0, 0.004, 0.005, 0.01, 0.99, 1, 12.5, 54.23, 999.999, 1000, 1299, 12345.678,
		999999.995, 1e6, 123456789.12, 999999999.99, 5e8 + 0.125}
	x := 0.37
	for range 2000 {
		x = math.Mod(x*7919.13+0.731, 1e9)
		xs = append(xs, x)
	}
	for _, x := range xs {
		mvRoundTrip(t, x)
	}
}

func mvRoundTrip(t *testing.T, x float64) {
	t.Helper()
	s := fmt.Sprintf("$%.2f", x)
	m, err := ParseMoney(s)
	if err != nil {
		t.Fatalf("ParseMoney(%q) for %v: %v", s, x, err)
	}
	if m.Currency != "USD" || !NearlyEqual(m.Amount, x, 0.005+1e-9*math.Max(1, x)) {
		t.Fatalf("ParseMoney(%q) = %v %q, want %v USD", s, m.Amount, m.Currency, x)
	}
}

func mvCheckResult(t *testing.T, fn, s string, v float64, err error) {
	t.Helper()
	if err != nil {
		if !strings.HasPrefix(err.Error(), "grade: "+fn+" ") {
			t.Fatalf("%s(%q) error %q does not name the function", fn, s, err)
		}
		return
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxAbsValue {
		t.Fatalf("%s(%q) = %v, want a finite value within MaxAbsValue", fn, s, v)
	}
}

// mvFuzzMax bounds fuzz inputs: the fuzzer minimizes each new input in
// quadratic time, and long inputs (which only repeat what short ones reach)
// stall it for the whole run. TestValueLongInputs covers long inputs.
const mvFuzzMax = 256

// TestValueLongInputs runs the fuzz properties over long inputs built from the
// seeds, up to and just over MaxValueInput.
func TestValueLongInputs(t *testing.T) {
	for _, seed := range mvSeeds {
		for _, n := range []int{300, 1000, MaxValueInput} {
			s := strings.Repeat(seed+" ", n/(len(seed)+1)+1)[:n]
			s = strings.ToValidUTF8(s, "")
			m, err := ParseMoney(s)
			mvCheckResult(t, "ParseMoney", s, m.Amount, err)
			v, err := ParseNumber(s)
			mvCheckResult(t, "ParseNumber", s, v, err)
			if nt := NormText(s); NormText(nt) != nt || !utf8.ValidString(nt) {
				t.Fatalf("NormText not idempotent on %q", s)
			}
		}
	}
	for _, s := range []string{strings.Repeat("9", MaxValueInput), strings.Repeat("1,", MaxValueInput/2), strings.Repeat("-", MaxValueInput)} {
		m, err := ParseMoney(s)
		if err == nil {
			t.Errorf("ParseMoney(%q...) = %v, want an error", s[:20], m)
		}
		mvCheckResult(t, "ParseMoney", s, m.Amount, err)
	}
}

var mvSeeds = []string{
	"$1,299.00", "1.299,00 €", "USD 45", "45 dollars", "£54.23", "€\u00a01\u202f299,00", "1'299.00 CHF",
	"₹1,29,999", "US$ 12.50", "-$5.00", "The price is £54.23.", "was $60, now $45", "free", "1.2.3",
	"$1.2 million", "99¢", "0.299", "45%", "approximately 12", "8 jobs", "$" + strings.Repeat("9", 30),
	"-", "$-", ".", "..5", "1,,2", "5 -$", "C$-5", "- $ 5", "1 000 000 000 000 000 000",
}

func FuzzParseMoney(f *testing.F) {
	for _, s := range mvSeeds {
		f.Add(s, 0.0)
	}
	f.Add("", 123.45)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if len(s) > mvFuzzMax {
			return
		}
		m, err := ParseMoney(s)
		mvCheckResult(t, "ParseMoney", s, m.Amount, err)
		if err == nil && m.Currency != "" {
			if len(m.Currency) != 3 || strings.ToUpper(m.Currency) != m.Currency {
				t.Fatalf("ParseMoney(%q) currency %q, want an ISO code", s, m.Currency)
			}
		}
		if x >= 0 && x < 1e9 {
			mvRoundTrip(t, x)
		}
	})
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range mvSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > mvFuzzMax {
			return
		}
		v, err := ParseNumber(s)
		mvCheckResult(t, "ParseNumber", s, v, err)
	})
}

func FuzzNormText(f *testing.F) {
	for _, s := range append(mvSeeds, "Straße", "ﬁ", "e\u0301", "\u0345\u03b9", "ǅ", "\xff", " \u00b4 ") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > mvFuzzMax {
			return
		}
		n := NormText(s)
		if !utf8.ValidString(n) {
			t.Fatalf("NormText(%q) = %q, not valid UTF-8", s, n)
		}
		if nn := NormText(n); nn != n {
			t.Fatalf("NormText not idempotent: NormText(%q) = %q, NormText of that = %q", s, n, nn)
		}
		if strings.HasPrefix(n, " ") || strings.HasSuffix(n, " ") || strings.Contains(n, "  ") {
			t.Fatalf("NormText(%q) = %q has untrimmed or doubled spaces", s, n)
		}
	})
}
