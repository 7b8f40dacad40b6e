// Package words holds the English plurals of pab's messages ("1 page", "3 pages").
package words

import "strconv"

// Plural returns word for n == 1 and word+"s" otherwise ("byte", "bytes").
func Plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Count returns n and word in the plural n asks for: "1 page", "0 pages", "3 pages".
func Count(n int, word string) string {
	return strconv.Itoa(n) + " " + Plural(n, word)
}
