package rules

// infer_write.go: writing inferred rule files into a task (the only file I/O of inference;
// Infer itself reads and writes nothing).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// WriteAutoFiles makes dir (a task's rules directory, created when missing) hold exactly
// the inferred files given: each is written as <Site>.auto.yaml atomically (a temporary
// file in dir, fsync, rename), and every other *.auto.yaml in dir, left by an earlier
// import for a site no longer inferred, is removed. Hand-written files (<site>.yaml) and
// all other names are never touched. Before anything is written every file is checked: a
// site name that is empty, _default, hidden, or holds a path separator, a site given
// twice, or YAML that does not parse with ParseFile is an error and nothing changes.
// Files are written through os.Root, so a symlink leading out of dir is refused.
func WriteAutoFiles(dir string, files []*InferredFile) error {
	names := map[string]bool{}
	for _, f := range files {
		if f == nil {
			return fmt.Errorf("write inferred rules in %s: nil file", dir)
		}
		if !validSiteName(f.Site) {
			return fmt.Errorf("write inferred rules in %s: bad site name %q", dir, f.Site)
		}
		name := AutoFileName(f.Site)
		if names[name] {
			return fmt.Errorf("write inferred rules in %s: site %q given twice", dir, f.Site)
		}
		names[name] = true
		pf, err := ParseFile(name, f.YAML)
		if err != nil {
			return fmt.Errorf("write inferred rules in %s: %w", dir, err)
		}
		if pf.Site != "" && pf.Site != f.Site {
			return fmt.Errorf("write inferred rules in %s: %s: field site is %q, want %q", dir, name, pf.Site, f.Site)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write inferred rules: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write inferred rules: %w", err)
	}
	defer root.Close()
	for _, f := range files {
		if err := atomicfile.WriteIn(root, AutoFileName(f.Site), f.YAML, 0o644); err != nil {
			return err
		}
	}
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		d.Close()
		return fmt.Errorf("list %s: %w", dir, err)
	}
	stale := []string{}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".auto.yaml") && !names[n] && !strings.HasPrefix(n, ".") && !e.IsDir() {
			stale = append(stale, n)
		}
	}
	slices.Sort(stale)
	for _, n := range stale {
		if err := root.Remove(n); err != nil {
			d.Close()
			return fmt.Errorf("remove stale inferred rules %s: %w", filepath.Join(dir, n), err)
		}
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
