package replay

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestCanonicalKeys: the header field names replay's hot path looks up without
// canonicalizing them (firstValue, headerHasToken, a direct h["Name"]) are in canonical
// form, as net/http and x/net/http2 store a request's fields; a name that is not would
// never be found. It reads the sources of replay and of recording's request type.
func TestCanonicalKeys(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "recording", "restype.go"))
	re := regexp.MustCompile(`(?:firstValue\([\w.]+, |headerHasToken\([\w.]+, |Header\[)"([^"]+)"`)
	seen := 0
	for _, f := range files {
		if filepath.Base(f) == "canonical_test.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			seen++
			if k := string(m[1]); http.CanonicalHeaderKey(k) != k {
				t.Errorf("%s: %q is looked up as is, but its canonical form is %q", f, k, http.CanonicalHeaderKey(k))
			}
		}
	}
	if seen < 10 {
		t.Errorf("found %d header names looked up as is; the pattern no longer matches the sources", seen)
	}
}
