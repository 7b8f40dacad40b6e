package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// treeDigest is a listing of every file under dir with its sha256 and every directory and
// link, so that a test can tell whether anything there was written.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case de.Type()&fs.ModeSymlink != 0:
			dest, _ := os.Readlink(p)
			lines = append(lines, rel+" -> "+dest)
		case de.IsDir():
			lines = append(lines, rel+"/")
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(data)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// insideTaskRepo makes, under base, a repository (sites/ and tasks/t: the demo task
// books-sapiens-price with a rules/ directory) and an outside directory holding the same
// tree; it returns both.
func insideTaskRepo(t *testing.T, base string) (root, outside string) {
	t.Helper()
	root, outside = filepath.Join(base, "repo"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		copyTask(t, "books-sapiens-price", d)
		if err := os.Rename(filepath.Join(d, "tasks", "books-sapiens-price"), filepath.Join(d, "tasks", "t")); err != nil {
			t.Fatal(err)
		}
		card := filepath.Join(d, "tasks", "t", "task.yaml")
		data, err := os.ReadFile(card)
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.Replace(data, []byte("id: books-sapiens-price\n"), []byte("id: t\n"), 1)
		writeFile(t, card, string(data))
		rule, err := os.ReadFile(filepath.Join(repoRoot, "sites", "books.toscrape.com.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "tasks", "t", "rules", "books.toscrape.com.yaml"), string(rule))
		if err := os.CopyFS(filepath.Join(d, "sites"), os.DirFS(filepath.Join(repoRoot, "sites"))); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

// TestOutsideRepositoryRefused: a symbolic link leading outside the repository at any level
// of a task (tasks/, tasks/t, its recording/ and rules/, a file in each, task.yaml,
// grading.yaml) is refused by every command that reads or writes tasks, with a line naming
// the link and "outside the repository", a non-zero exit, and nothing written outside.
// pab tasks lists the task as refused. A replay of the same repository without the link
// works (the control).
func TestOutsideRepositoryRefused(t *testing.T) {
	warcIn := filepath.Join(repoRoot, "tasks", "books-sapiens-price", "recording", "data.warc.gz")
	for _, rel := range []string{"tasks", "tasks/t", "tasks/t/recording", "tasks/t/rules",
		"tasks/t/recording/data.warc.gz", "tasks/t/rules/books.toscrape.com.yaml", "tasks/t/task.yaml", "tasks/t/grading.yaml"} {
		t.Run(strings.ReplaceAll(rel, "/", "_"), func(t *testing.T) {
			base := t.TempDir()
			root, outside := insideTaskRepo(t, base)
			p := filepath.Join(root, filepath.FromSlash(rel))
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, filepath.FromSlash(rel)), p); err != nil {
				t.Fatal(err)
			}
			before := treeDigest(t, outside)
			log := filepath.Join(base, "replay.jsonl")
			writeFile(t, log, "")
			answer := filepath.Join(base, "answer.txt")
			writeFile(t, answer, "£20\n")
			for _, args := range [][]string{
				{"tasks"},
				{"replay", "t", "--check"},
				{"replay", filepath.Join(root, "tasks", "t"), "--check"},
				{"replay", filepath.Join(root, "tasks", "t", "recording"), "--check"},
				{"inspect", "t", "https://books.toscrape.com/"},
				{"audit", "t"},
				{"export", "t", "--warc", filepath.Join(base, "out.warc.gz")},
				{"check", "t", "--crawl"},
				{"stats", log, "t"},
				{"grade", "t", "--log", log, "--answer", answer, "--out", filepath.Join(base, "grade")},
				{"import", "--task", "t", warcIn},
				{"import", "--task", "t", "--replace", warcIn},
				{"record", "--task", "t", "--listen", "127.0.0.1:0"},
				{"recording", "migrate", "t"},
				{"recording", "migrate", filepath.Join(root, "tasks", "t")},
				{"audit", filepath.Join(root, "tasks", "t")},
				{"audit", filepath.Join(root, "tasks", "t", "recording")},
				{"export", filepath.Join(root, "tasks", "t"), "--wacz", filepath.Join(base, "out.wacz")},
				{"inspect", filepath.Join(root, "tasks", "t", "recording"), "https://books.toscrape.com/"},
				{"rules", "check"},
				{"rules", "check", filepath.Join(root, "tasks", "t", "rules")},
				{"k8s", "render", "--agent-image", "a", "--replay-image", "r", "--task-image-prefix", "p", "--out", filepath.Join(base, "k8s"), "t"},
			} {
				cmd := exec.Command(pabBin, append([]string{"--repo", root}, args...)...)
				cmd.Env = append(os.Environ(), "PAB_CACHE="+filepath.Join(base, "cache"), "PAB_REPO=")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				if err == nil {
					t.Errorf("pab %s: exit 0; want a refusal\nstdout: %s\nstderr: %s", strings.Join(args, " "), stdout.String(), stderr.String())
					continue
				}
				if !strings.Contains(stderr.String(), "outside the repository") || !strings.Contains(stderr.String(), " is a symbolic link to "+outside) {
					t.Errorf("pab %s: %v, stderr %q; want a line naming the link and saying it leads outside the repository", strings.Join(args, " "), err, stderr.String())
				}
				if args[0] == "tasks" && !strings.Contains(stdout.String(), "(refused: outside the repository)") {
					t.Errorf("pab tasks does not list t as refused:\n%s", stdout.String())
				}
			}
			if after := treeDigest(t, outside); after != before {
				t.Errorf("the outside directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			for _, f := range []string{"out.warc.gz", "out.wacz", "grade", "k8s"} {
				if _, err := os.Lstat(filepath.Join(base, f)); err == nil {
					t.Errorf("%s was written for a refused task", f)
				}
			}
		})
	}
	// the control: the same repository without a link replays
	base := t.TempDir()
	root, _ := insideTaskRepo(t, base)
	cmd := exec.Command(pabBin, "--repo", root, "replay", "t", "--check")
	cmd.Env = append(os.Environ(), "PAB_CACHE="+filepath.Join(base, "cache"), "PAB_REPO=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("control replay: %v\n%s", err, out)
	}
}
