package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`{}`, 1}, {`{"a":[1,{"b":2}]}`, 3}, {`"[[[["`, 0}, {`{"a":"\"[[["}`, 1},
		{strings.Repeat("[", 100), 65}, {`not json`, 0}, {`42`, 0},
		// closers with nothing open do not lower the count of what follows
		{strings.Repeat("]", 10) + strings.Repeat("[", 70), 65},
	} {
		if got := Depth([]byte(tc.in), 64); got != tc.want {
			t.Errorf("Depth(%.40q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzDepth: for valid JSON, Depth agrees with the nesting encoding/json decodes.
func FuzzDepth(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"]["}]}`))
	f.Add([]byte(`[[[]],[]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := Depth(data, 1000)
		if got < 0 || got > 1001 {
			t.Fatalf("Depth = %d", got)
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if want := nesting(v); got != want {
			t.Fatalf("Depth(%q) = %d, decoded nesting %d", data, got, want)
		}
	})
}

func nesting(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, nesting(e))
		}
		return d + 1
	case map[string]any:
		for _, e := range x {
			d = max(d, nesting(e))
		}
		return d + 1
	}
	return 0
}
