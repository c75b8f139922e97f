package mpichsuite

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Subsets are named selections of tests ("dir/program": every testlist line
// of that program), for `make test` and SUBSET= of scripts/mpich-suite.sh.
var Subsets = map[string][]string{
	// fast: a few seconds each with Debian's MPICH (ch4:ucx, no spawn):
	// start-up, exit status, abort, point-to-point, collectives,
	// communicators, groups, info, attributes, topology, one-sided.
	"fast": {
		"init/exitst1", "init/exitst2", "init/initstat", "init/version",
		"pt2pt/sendrecv3", "coll/allred2", "coll/reduce_local", "comm/dup",
		"group/groupcreate", "info/infodup", "attr/attrt", "topo/cartmap1",
		"rma/winname",
	},
	// ci: representative with a ch3 build: the fast ones plus
	// spawn, connect/accept, name publishing, and fault tolerance.
	"ci": {
		"init/exitst1", "init/exitst2", "init/initstat",
		"pt2pt/sendrecv3", "coll/allred2", "comm/dup", "topo/cartmap1", "rma/winname",
		"spawn/namepub", "spawn/spawn1", "spawn/spawn2", "spawn/spawnargv",
		"spawn/spawnintra", "spawn/spaconacc", "spawn/selfconacc", "spawn/join",
		"spawn/spaiccreate", "spawn/concurrent_spawns", "spawn/spawn_rootargs",
		"ft/abort", "ft/die", "ft/senddead", "ft/recvdead",
	},
}

// Subset returns the named subset, or an error listing the names.
func Subset(name string) ([]string, error) {
	s, ok := Subsets[name]
	if !ok {
		var names []string
		for n := range Subsets {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no subset %q (there are: %s)", name, strings.Join(names, ", "))
	}
	return s, nil
}

// Dirs returns the directories the names of a subset are in, in order.
func Dirs(names []string) []string {
	var out []string
	for _, n := range names {
		d, _, _ := strings.Cut(n, "/")
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Select keeps the tests named in names ("dir/program"), in the order of
// tests. A name that matches no test is an error: a subset that silently
// shrinks would test less than it says.
func Select(tests []Test, names []string) ([]Test, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = false
	}
	var out []Test
	for _, t := range tests {
		k := t.Dir + "/" + t.Name
		if _, ok := want[k]; ok {
			want[k] = true
			out = append(out, t)
		}
	}
	var missing []string
	for _, n := range names {
		if !want[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no test named %s in the testlists read", strings.Join(missing, ", "))
	}
	return out, nil
}
