// Package gobuild gives tests that build dynrt's binaries with `go build`
// the build tags of the test binary itself: under `make test` (-tags pmix)
// a dynrun built by a test must host a PMIx server as the test's own
// in-process daemons do, or the Open MPI tests would run one build against
// the other.
package gobuild

import "github.com/dynrt/dynrt/lib/pmix"

// Flags returns the `go build` flags that select this binary's build tags.
func Flags() []string {
	if pmix.Available() {
		return []string{"-tags", "pmix"}
	}
	return nil
}

// Args returns `build` followed by Flags and then args, for exec.Command("go", ...).
func Args(args ...string) []string {
	return append(append([]string{"build"}, Flags()...), args...)
}
