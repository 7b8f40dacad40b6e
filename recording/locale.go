package recording

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/text/language"
)

// maxLocaleLen and maxTimezoneLen bound the locale and time zone values read from a
// manifest, task.yaml or the command line, in bytes.
const (
	maxLocaleLen   = 64
	maxTimezoneLen = 64
)

// bcp47Syntax is the shape of a BCP 47 language tag (RFC 5646 section 2.1): subtags of 1
// to 8 letters and digits joined by hyphens, the first of 2 to 8 letters (or "i"/"x" for
// grandfathered and private-use tags, refused here: a browser language is never one).
var bcp47Syntax = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)

// CheckLocale checks that tag is a BCP 47 language tag (RFC 5646), such as "en-US" or
// "de-CH": the syntax of RFC 5646 section 2.1 (hyphens, never underscores: "en_US" is a
// POSIX locale, not a tag), and a tag golang.org/x/text/language parses (known language,
// well-formed subtags). The error says what is wrong; the caller names the file and field.
func CheckLocale(tag string) error {
	if len(tag) > maxLocaleLen {
		return fmt.Errorf("%q is longer than %d bytes", tag[:maxLocaleLen]+"...", maxLocaleLen)
	}
	if !bcp47Syntax.MatchString(tag) {
		hint := ""
		if strings.Contains(tag, "_") {
			hint = fmt.Sprintf(" (write %q: BCP 47 uses hyphens)", strings.ReplaceAll(tag, "_", "-"))
		}
		return fmt.Errorf("%q is not a BCP 47 language tag such as \"en-US\"%s", tag, hint)
	}
	if _, err := language.Parse(tag); err != nil {
		return fmt.Errorf("%q is not a BCP 47 language tag such as \"en-US\": %v", tag, err)
	}
	return nil
}

// CheckTimezone checks that zone is an IANA time zone name that time.LoadLocation loads
// from the system's zone database ("America/New_York", "UTC"); "Local" and "" are refused,
// since they name no zone. The error says what is wrong; the caller names the file and field.
func CheckTimezone(zone string) error {
	if len(zone) > maxTimezoneLen {
		return fmt.Errorf("%q is longer than %d bytes", zone[:maxTimezoneLen]+"...", maxTimezoneLen)
	}
	if zone == "" || zone == "Local" {
		return fmt.Errorf("%q is not an IANA time zone name such as \"America/New_York\"", zone)
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return fmt.Errorf("%q is not an IANA time zone name such as \"America/New_York\": %v", zone, err)
	}
	return nil
}

// checkManifestLocale checks m's locale and timezone (when set); path names the file in
// the error.
func checkManifestLocale(m *Manifest, path string) error {
	if m.Locale != "" {
		if err := CheckLocale(m.Locale); err != nil {
			return fmt.Errorf("read %s: locale: %w", path, err)
		}
	}
	if m.Timezone != "" {
		if err := CheckTimezone(m.Timezone); err != nil {
			return fmt.Errorf("read %s: timezone: %w", path, err)
		}
	}
	return nil
}

// AcceptLanguageTag returns the first language tag of an Accept-Language field value (RFC
// 9110 section 12.5.4), the browser's first choice: "en-GB" for "en-GB,en;q=0.9". Weights
// are not compared (browsers list their languages in order of preference); "*", a tag of
// weight 0 and a tag CheckLocale refuses are skipped. "" when the value names none.
func AcceptLanguageTag(v string) string {
	for part := range strings.SplitSeq(v, ",") {
		tag, params, _ := strings.Cut(part, ";")
		tag = strings.TrimSpace(tag)
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if q = strings.TrimSpace(q); q == "0" || strings.Trim(q, "0.") == "" {
				continue
			}
		}
		if tag == "" || tag == "*" || CheckLocale(tag) != nil {
			continue
		}
		return tag
	}
	return ""
}
