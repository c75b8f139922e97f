// Package runner runs MPICH's test suite (test/mpi) under mpiexec.hydra
// and dynrun: it configures and builds the test programs of an MPICH build,
// starts every test of the chosen directories under each runner with a
// time limit, checks that nothing of it is left running and judges it with
// internal/mpichsuite.
package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/dynrt/dynrt/internal/mpichsuite"
)

// Collect reads the testlists (lists, e.g. "testlist") of dirs the way
// runtests does: the configured file in the build tree buildDir if there is
// one, else the source tree's srcDir (a testlist.in there has its @var@
// placeholders replaced with mpichsuite.ConfigureVars). A line naming a
// directory is recursed into. A missing "testlist" is an error; other
// lists (testlist.dtp, …) are optional, as in runtests.
func Collect(srcDir, buildDir string, dirs, lists []string) ([]mpichsuite.Test, []mpichsuite.Directive, error) {
	var tests []mpichsuite.Test
	var dirs2 []mpichsuite.Directive
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > 8 {
			return fmt.Errorf("testlists nest deeper than 8 directories at %s", dir)
		}
		for _, list := range lists {
			data, err := readList(srcDir, buildDir, dir, list)
			if errors.Is(err, fs.ErrNotExist) && list != "testlist" {
				continue
			}
			if err != nil {
				return err
			}
			ents, err := mpichsuite.ParseTestlist(bytes.NewReader(data), dir)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if e.Directive != nil {
					d := *e.Directive
					d.Dir = path.Join(dir, d.Dir)
					dirs2 = append(dirs2, d)
					continue
				}
				sub := path.Join(dir, e.Test.Name)
				if isDir(filepath.Join(srcDir, sub)) || isDir(filepath.Join(buildDir, sub)) {
					if err := walk(sub, depth+1); err != nil {
						return err
					}
					continue
				}
				tests = append(tests, e.Test)
			}
		}
		return nil
	}
	for _, d := range dirs {
		if err := walk(d, 0); err != nil {
			return nil, nil, err
		}
	}
	return tests, dirs2, nil
}

func readList(srcDir, buildDir, dir, list string) ([]byte, error) {
	if data, err := os.ReadFile(filepath.Join(buildDir, dir, list)); err == nil {
		return data, nil
	}
	if data, err := os.ReadFile(filepath.Join(srcDir, dir, list)); err == nil {
		return data, nil
	}
	in := filepath.Join(srcDir, dir, list+".in")
	data, err := os.ReadFile(in)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no %s for directory %s (looked in %s and %s): %w", list, dir, buildDir, srcDir, fs.ErrNotExist)
		}
		return nil, err
	}
	s, err := mpichsuite.Substitute(string(data), mpichsuite.ConfigureVars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	return []byte(s), nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
