// WARC digests (WARC 1.1 sections 5.8 and 5.9): parsing algorithm:value in its base16,
// base32 and base64 forms, and checking a payload against it.

package warc

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// Digest is a parsed WARC digest field value, "algorithm:value" (WARC 1.1 section 5.8 and
// 5.9). The value may be base16 (hex), base32 (the usual form for sha1), base64 or
// base64url, padded or not.
type Digest struct {
	// Algorithm is lower case without dashes: "sha1", "sha256", "sha512" or "md5".
	Algorithm string
	// Sum is the raw digest.
	Sum []byte
}

// ParseDigest reads "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", "sha256:<hex>",
// "sha1:2jmj7l5rSw0yVb/vlWAYkK/YBwk=" or "sha1:2jmj7l5rSw0yVb_vlWAYkK_YBwk=".
func ParseDigest(s string) (Digest, error) {
	algo, val, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Digest{}, errors.New("no algorithm prefix")
	}
	algo = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(algo)), "-", "")
	size := 0
	switch algo {
	case "md5":
		size = md5.Size
	case "sha1":
		size = sha1.Size
	case "sha256":
		size = sha256.Size
	case "sha512":
		size = sha512.Size
	default:
		return Digest{}, fmt.Errorf("unsupported digest algorithm %q", algo)
	}
	val = strings.TrimSpace(val)
	try := func(dec func(string) ([]byte, error), v string) []byte {
		b, err := dec(v)
		if err != nil || len(b) != size {
			return nil
		}
		return b
	}
	unpadded := strings.TrimRight(val, "=")
	candidates := []func() []byte{
		func() []byte { return try(hex.DecodeString, val) },
		func() []byte {
			return try(base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString, strings.ToUpper(unpadded))
		},
		func() []byte { return try(base64.RawStdEncoding.DecodeString, unpadded) },
		func() []byte { return try(base64.RawURLEncoding.DecodeString, unpadded) },
	}
	for _, c := range candidates {
		if b := c(); b != nil {
			return Digest{Algorithm: algo, Sum: b}, nil
		}
	}
	return Digest{}, fmt.Errorf("%s value %q is not base16, base32 or base64", algo, val)
}

// Hash returns a new hash of the digest's algorithm.
func (d Digest) Hash() hash.Hash {
	switch d.Algorithm {
	case "md5":
		return md5.New()
	case "sha1":
		return sha1.New()
	case "sha512":
		return sha512.New()
	default:
		return sha256.New()
	}
}

// Matches reports whether b has this digest.
func (d Digest) Matches(b []byte) bool {
	h := d.Hash()
	h.Write(b)
	return bytes.Equal(h.Sum(nil), d.Sum)
}

// Key is a canonical text form, "algorithm:hex", equal for equal digests whatever
// encoding they were written in.
func (d Digest) Key() string { return d.Algorithm + ":" + hex.EncodeToString(d.Sum) }
