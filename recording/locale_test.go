package recording

import (
	"strings"
	"testing"
)

func TestCheckLocaleTimezone(t *testing.T) {
	for _, tag := range []string{"en-US", "de-CH", "en", "fr-FR-u-ca-gregory", "zh-Hant-TW"} {
		if err := CheckLocale(tag); err != nil {
			t.Errorf("CheckLocale(%q): %v", tag, err)
		}
	}
	for tag, want := range map[string]string{
		"en_US":                 `(write "en-US": BCP 47 uses hyphens)`,
		"zz-ZZ":                 "well-formed but unknown",
		"english":               "is not a BCP 47 language tag",
		"":                      "is not a BCP 47 language tag",
		"en-US ":                "is not a BCP 47 language tag",
		strings.Repeat("a", 99): "longer than 64 bytes",
	} {
		if err := CheckLocale(tag); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLocale(%q) = %v, want %q", tag, err, want)
		}
	}
	for _, z := range []string{"UTC", "America/New_York", "Europe/Zurich", "Etc/GMT+5"} {
		if err := CheckTimezone(z); err != nil {
			t.Errorf("CheckTimezone(%q): %v", z, err)
		}
	}
	for _, z := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "New York"} {
		if err := CheckTimezone(z); err == nil || !strings.Contains(err.Error(), "is not an IANA time zone name") {
			t.Errorf("CheckTimezone(%q) = %v", z, err)
		}
	}
}

func TestAcceptLanguageTag(t *testing.T) {
	for in, want := range map[string]string{
		"de-CH,de;q=0.9,en;q=0.8": "de-CH",
		"en-US":                   "en-US",
		"*, fr;q=0.5":             "fr",
		"xx-bad,en-GB;q=0.7":      "en-GB",
		"fr;q=0, de;q=0.3":        "de",
		"":                        "",
		"*":                       "",
	} {
		if got := AcceptLanguageTag(in); got != want {
			t.Errorf("AcceptLanguageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
