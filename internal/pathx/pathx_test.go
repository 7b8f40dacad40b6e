package pathx

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRel(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, path, rel string
		ok             bool
	}{
		{"/a/b", "/a/b", ".", true},
		{"/a/b", "/a/b/c/d", "c/d", true},
		{"/a/b/", "/a/b/c/../d", "d", true},
		{"/a/b", "/a/bc", "", false},
		{"/a/b", "/a", "", false},
		{"/a/b", "/a/b/../../etc", "", false},
		{"/a/b", "/a/b/..foo", "..foo", true},
		{"rel", filepath.Join(wd, "rel", "x"), "x", true},
	} {
		rel, ok := Rel(c.dir, c.path)
		if rel != c.rel || ok != c.ok {
			t.Errorf("Rel(%q, %q) = %q, %v; want %q, %v", c.dir, c.path, rel, ok, c.rel, c.ok)
		}
		if Within(c.path, c.dir) != c.ok {
			t.Errorf("Within(%q, %q) != %v", c.path, c.dir, c.ok)
		}
	}
}
