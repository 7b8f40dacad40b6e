package rules

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCheckAllLayers checks a repository's layout as pab rules check does: a task's rules
// on top of sites/ may rely on the hosts sites/ lists; problems come in job order and the
// rule files are counted.
func TestCheckAllLayers(t *testing.T) {
	tmp := t.TempDir()
	sites := filepath.Join(tmp, "sites")
	task := filepath.Join(tmp, "tasks", "t1", "rules")
	writeFiles(t, sites, map[string]string{"_default.yaml": "drop_params: [utm_*]\n", "shop.yaml": "hosts: [shop.test]\n", "x.yml": "hosts: [x.test]\n"})
	writeFiles(t, task, map[string]string{"shop.yaml": "drop_params: [sid]\n", ".hidden.yaml": "junk: [", "bad.yaml": "hosts: [b.test]\nexclude: 3\n"})
	jobs := RepoJobs(sites, []string{task, filepath.Join(tmp, "tasks", "t2", "rules")})
	var got []string
	problems, files, err := CheckAll(jobs, func(p Problem) { got = append(got, p.String()) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sites + "/x.yml: rule files end in .yaml: rename it x.yaml",
		task + "/bad.yaml:2: exclude: want a list of strings, got a number"}
	if !reflect.DeepEqual(got, want) || problems != 2 || files != 5 {
		t.Errorf("problems %d %q, files %d; want 2 %q, 5", problems, got, files, want)
	}
	jobs, err = DirJobs(sites, []string{task, sites}, strings.ToUpper)
	if err != nil {
		t.Fatal(err)
	}
	wantJobs := []CheckJob{{Dir: strings.ToUpper(task), Base: []string{sites}}, {Dir: strings.ToUpper(sites)}}
	if !reflect.DeepEqual(jobs, wantJobs) {
		t.Errorf("DirJobs = %+v, want %+v", jobs, wantJobs)
	}
	if _, err := DirJobs(sites, []string{filepath.Join(sites, "shop.yaml")}, filepath.Clean); err == nil || !strings.HasSuffix(err.Error(), "shop.yaml is not a directory") {
		t.Errorf("DirJobs on a file: %v", err)
	}
	if _, err := DirJobs(sites, []string{filepath.Join(tmp, "nope")}, filepath.Clean); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("DirJobs on a missing directory: %v", err)
	}
}
