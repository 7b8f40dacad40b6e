package rules

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckJob is one directory of rule files CheckAll checks, on top of the Base directories
// (the lower layers, as CheckDir takes them).
type CheckJob struct {
	Dir  string
	Base []string
}

// RepoJobs are the checks of a whole repository: sitesDir alone, then each task's rules
// directory on top of it, as replay layers them.
func RepoJobs(sitesDir string, taskRulesDirs []string) []CheckJob {
	jobs := []CheckJob{{Dir: sitesDir}}
	for _, d := range taskRulesDirs {
		jobs = append(jobs, CheckJob{Dir: d, Base: []string{sitesDir}})
	}
	return jobs
}

// DirJobs are the checks of the directories dirs, each on top of sitesDir unless it is
// sitesDir; name gives the name a directory is checked under (problems name files by it).
// A dir that does not exist or is no directory is an error naming it.
func DirJobs(sitesDir string, dirs []string, name func(string) string) ([]CheckJob, error) {
	var jobs []CheckJob
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", dir)
		}
		j := CheckJob{Dir: name(dir)}
		if !samePath(dir, sitesDir) {
			j.Base = []string{sitesDir}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// CheckAll checks every job (CheckDir), calling each for every problem in order, and
// returns how many problems and rule files (CountFiles) there were. The error is
// CheckDir's, for the first directory that cannot be read; the jobs before it are reported.
func CheckAll(jobs []CheckJob, each func(Problem)) (problems, files int, err error) {
	for _, j := range jobs {
		ps, err := CheckDir(j.Dir, j.Base...)
		if err != nil {
			return problems, files, err
		}
		for _, p := range ps {
			each(p)
		}
		problems += len(ps)
		files += CountFiles(j.Dir)
	}
	return problems, files, nil
}

// CountFiles counts the *.yaml and *.yml files of dir that are not hidden (0 when dir
// cannot be read).
func CountFiles(dir string) int {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range des {
		name := de.Name()
		if name[0] != '.' && (filepath.Ext(name) == ".yaml" || filepath.Ext(name) == ".yml") {
			n++
		}
	}
	return n
}

// samePath reports whether a and b name the same directory (after making them absolute).
func samePath(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}
