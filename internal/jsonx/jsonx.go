// Package jsonx holds the check pab makes on JSON that may be hostile before decoding it:
// how deep its arrays and objects nest (encoding/json recurses once per level, so a body
// nested a million deep costs a million stack frames before it fails).
package jsonx

// Depth returns how deeply the arrays and objects of data nest (0 for a scalar, 1 for
// {} or []), looking at brackets outside strings only, without decoding. It stops at
// limit+1 and returns limit+1 for anything deeper, so a caller tests Depth(data, n) > n.
// A closing bracket with nothing open is ignored (data need not be valid JSON).
func Depth(data []byte, limit int) int {
	depth, deepest := 0, 0
	inString, esc := false, false
	for _, ch := range data {
		if inString {
			switch {
			case esc:
				esc = false
			case ch == '\\':
				esc = true
			case ch == '"':
				inString = false
			}
			continue
		}
		switch ch {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return limit + 1
				}
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return deepest
}
