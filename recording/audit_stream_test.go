package recording

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAuditContentStreamInStep: a bundle pab wrote is audited in step (ok, no problems),
// one whose entries name their records out of archive order is left to the audit that
// holds every record (ok false), which finds it clean all the same.
func TestAuditContentStreamInStep(t *testing.T) {
	dir := cleanAuditBundle(t)
	names := auditNames{manifest: filepath.Join(dir, ManifestFile), warc: filepath.Join(dir, WARCFile),
		entries: filepath.Join(dir, EntriesFile), pages: filepath.Join(dir, PagesFile)}
	probs, ok := auditContentStream(context.Background(), dir, names)
	if !ok || len(probs) != 0 {
		t.Fatalf("clean bundle: ok %v, problems:\n%s", ok, problemText(probs))
	}
	p := filepath.Join(dir, EntriesFile)
	lines := strings.Split(strings.TrimSuffix(string(mustRead(t, p)), "\n"), "\n")
	slices.Reverse(lines)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := auditContentStream(context.Background(), dir, names); ok {
		t.Fatal("entries out of archive order audited in step")
	}
	// revisits now come before their originals: those are the only problems
	for _, pr := range Audit(dir) {
		if !strings.Contains(pr.Msg, "names no earlier entry") {
			t.Errorf("reversed entries: %s", pr)
		}
	}
}
