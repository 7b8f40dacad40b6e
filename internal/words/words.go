// Package words holds the English plurals of pab's messages ("1 page", "3 pages").
package words

import "strconv"

// Integer is any integer type a count may have.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Plural returns word for n == 1 and word+"s" otherwise ("byte", "bytes").
func Plural[N Integer](n N, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Count returns n and word in the plural n asks for: "1 page", "0 pages", "3 pages".
func Count[N Integer](n N, word string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Plural(n, word)
}

// Was returns "was" for n == 1 and "were" otherwise ("1 exchange was", "2 exchanges were").
func Was[N Integer](n N) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
