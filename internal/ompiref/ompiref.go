// Package ompiref reads the references recorded with Open MPI's own
// launcher (testdata/openmpi/<case>.golden, written by
// scripts/openmpi-ref.sh): what dynrun must match when it runs the same
// programs. A file holds one or more jobs, each as a "# command" line, an
// "exit N" line and the job's stdout lines, sorted.
package ompiref

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Job is one job of a reference.
type Job struct {
	Cmd   string   // the mpirun.openmpi command line
	Exit  int      // its exit status
	Lines []string // its stdout, sorted
}

// Parse reads the jobs of a reference file's text; name is for errors.
func Parse(name, text string) ([]Job, error) {
	var jobs []Job
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, "\n")
		switch {
		case strings.HasPrefix(l, "# "):
			jobs = append(jobs, Job{Cmd: l[2:]})
		case len(jobs) == 0:
			return nil, fmt.Errorf("%s: %q before the first \"# command\" line", name, l)
		case strings.HasPrefix(l, "exit "):
			code, err := strconv.Atoi(l[5:])
			if err != nil {
				return nil, fmt.Errorf("%s: %q: %w", name, l, err)
			}
			jobs[len(jobs)-1].Exit = code
		default:
			jobs[len(jobs)-1].Lines = append(jobs[len(jobs)-1].Lines, l)
		}
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s: no job (regenerate it with scripts/openmpi-ref.sh)", name)
	}
	return jobs, nil
}

// Read reads <dir>/<name>.golden, dir being the repository's
// testdata/openmpi.
func Read(dir, name string) ([]Job, error) {
	path := filepath.Join(dir, name+".golden")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, string(b))
}
