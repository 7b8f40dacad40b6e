package rules

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxHostLen bounds, in bytes, the host names ASCIIHost converts; longer names are kept as
// given (DNS names are at most 253 bytes, RFC 1035 section 2.3.4).
const MaxHostLen = 1024

// lenientIDNA is tried when idna.Lookup refuses a name only for its ASCII characters
// (an underscore, as in "my_host.example"): the same UTS #46 mapping, without the STD3
// rules. Its output is accepted only when it is a plain host name (hostNameBytes).
var lenientIDNA = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false))

// ASCIIHost returns the A-label (punycode) form of a host name, as browsers send it in the
// Host header, in SNI and in DNS: "bücher.example" and "BÜCHER.example" give
// "xn--bcher-kva.example" (IDNA2008 with the UTS #46 lookup mapping, non-transitional, as
// in idna.Lookup; RFC 5891 section 5). The name has no port and no brackets. A name that is
// already ASCII is returned as it is (lower-casing is the caller's), and so is a name that
// cannot be converted (invalid UTF-8, labels IDNA refuses, more than MaxHostLen bytes):
// ASCIIHost never fails, so a host the rules cannot read keeps one stable form.
func ASCIIHost(name string) string {
	if isASCII(name) || len(name) > MaxHostLen || !utf8.ValidString(name) || strings.HasPrefix(name, "[") {
		return name
	}
	for _, p := range []*idna.Profile{idna.Lookup, lenientIDNA} {
		a, err := p.ToASCII(name)
		if err == nil && a != "" && hostNameBytes(a) {
			return a
		}
	}
	return name
}

// hostNameBytes reports whether s holds only the bytes of a host name in the key:
// lower-case letters, digits, '-', '.' and '_'.
func hostNameBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' && c != '_' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiHostPattern converts the literal labels of a host pattern (hosts, endpoint host, the
// host part of a location) to their A-label form, so that a pattern written in Unicode
// ("*.bücher.example") matches the keys' hosts. Labels holding a wildcard or glob
// character ('*', '?', '[', '{', '\\') are kept as written, and so is an IPv6 literal.
func asciiHostPattern(p string) string {
	if isASCII(p) || strings.HasPrefix(p, "[") {
		return p
	}
	name, port, hasPort := strings.Cut(p, ":")
	labels := strings.Split(name, ".")
	for i, l := range labels {
		if !isASCII(l) && !strings.ContainsAny(l, "*?[{\\") {
			labels[i] = ASCIIHost(strings.ToLower(l))
		}
	}
	out := strings.Join(labels, ".")
	if hasPort {
		out += ":" + port
	}
	return out
}
