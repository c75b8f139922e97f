package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// StampName is the file scripts/mpich-suite.sh writes into an MPICH
// installation prefix once `make install` finished: a prefix without it is
// an unfinished build.
const StampName = "dynrt-build.stamp"

// BuildNames are the builds the suite knows, in run order.
var BuildNames = []string{"ch3-pmi1", "ch3-pmi2", "debian"}

// KnownBuild describes build name with cache as the cache directory, and
// whether it is present (built and stamped, or installed for Debian's).
func KnownBuild(name, cache string) (Build, bool, error) {
	switch name {
	case "ch3-pmi1", "ch3-pmi2":
		prefix := filepath.Join(cache, name)
		b := Build{
			Name:    name,
			Prefix:  prefix,
			MPICC:   filepath.Join(prefix, "bin", "mpicc"),
			Mpiexec: filepath.Join(prefix, "bin", "mpiexec.hydra"),
			Unset:   []string{"LD_LIBRARY_PATH"},
		}
		return b, exists(b.Mpiexec) && exists(filepath.Join(prefix, StampName)), nil
	case "debian":
		b := Build{Name: name, MPICC: "/usr/bin/mpicc.mpich", Mpiexec: "/usr/bin/mpiexec.hydra"}
		return b, exists(b.MPICC) && exists(b.Mpiexec), nil
	}
	return Build{}, false, fmt.Errorf("unknown MPICH build %q (known: %s)", name, strings.Join(BuildNames, ", "))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
