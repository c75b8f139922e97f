package psetview

import (
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func set(name, members string, active bool, ver, ep uint32) wire.PsetInfo {
	m := rr(members)
	return wire.PsetInfo{Name: name, Members: m, Size: uint32(m.Count()), Active: active, Version: ver, Epoch: ep}
}

// fig61 is app1 of thesis fig. 6.1: the root made inactive, three active
// working sets, and a SUB delta s1 that takes ranks from "mul".
func fig61() []wire.PsetInfo {
	return []wire.PsetInfo{
		set("mpi://WORLD", "0-7", true, 0, 0),
		set("mpi://app/app1", "0-7", false, 0, 0),
		set("mpi://app/app1/mul", "0-3", true, 0, 0),
		set("mpi://app/app1/add", "4-7", true, 0, 0),
		set("mpi://app/app1/roots", "0,4", true, 0, 0),
		set("mpi://rte/app1/rc/1", "2-3", true, 0, 1),
	}
}

func TestClassifyFig61(t *testing.T) {
	m := Classify(fig61(), "mpi://rte/app1/rc/1")
	want := map[string]string{
		"mpi://WORLD":          "-",
		"mpi://app/app1":       "-",
		"mpi://app/app1/mul":   "M C",
		"mpi://app/app1/add":   "M",
		"mpi://app/app1/roots": "M",
		"mpi://rte/app1/rc/1":  "D",
	}
	for name, flags := range want {
		if got := m[name].Flags(); got != flags {
			t.Errorf("%s: flags %q, want %q", name, got, flags)
		}
	}
	if !m["mpi://app/app1"].Root || m["mpi://app/app1/mul"].Root {
		t.Error("root mark wrong")
	}
	// Without a delta nothing is reference counted.
	if Classify(fig61(), "")["mpi://app/app1/mul"].RefCounted {
		t.Error("reference counted without a delta")
	}
}

func TestClassifyEdgeCases(t *testing.T) {
	sets := []wire.PsetInfo{
		set("mpi://app/a", "0-3", true, 0, 0),
		set("mpi://app/a/twin", "0-3", true, 0, 0), // equal members: both malleable
		set("mpi://app/a/part", "0-1", true, 0, 0), // strictly inside an active set
		set("mpi://app/a/gone", "", false, 2, 1),   // emptied by a change
		set("mpi://WORLD", "0-9", true, 0, 0),      // not in the app domain
	}
	m := Classify(sets, "")
	for name, want := range map[string]bool{"mpi://app/a": true, "mpi://app/a/twin": true, "mpi://app/a/part": false, "mpi://app/a/gone": false, "mpi://WORLD": false} {
		if m[name].Malleable != want {
			t.Errorf("%s malleable = %v, want %v", name, m[name].Malleable, want)
		}
	}
	if !m["mpi://app/a/gone"].Empty {
		t.Error("empty set not marked")
	}
}

func render(roots []*Node) string {
	var b strings.Builder
	for _, l := range Lines(roots) {
		b.WriteString(l.Prefix + l.Node.Set.Name + " [" + l.Node.Marks.Flags() + "]\n")
	}
	return b.String()
}

func TestTreeFig61(t *testing.T) {
	got := render(Tree(fig61(), "mpi://rte/app1/rc/1"))
	want := `mpi://WORLD [-]
└─ mpi://app/app1 [-]
   ├─ mpi://app/app1/add [M]
   ├─ mpi://app/app1/mul [M C]
   │  └─ mpi://rte/app1/rc/1 [D]
   └─ mpi://app/app1/roots [M]
`
	if got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

func TestTreeShapes(t *testing.T) {
	// After a grow the application root holds more than WORLD, so WORLD
	// hangs below it; an ADD delta not yet in any set is its own root;
	// empty sets are roots; deltas sort numerically.
	sets := []wire.PsetInfo{
		set("mpi://WORLD", "0-3", true, 0, 0),
		set("mpi://app/lu", "0-5", true, 1, 1),
		set("mpi://rte/lu/rc/10", "8-9", true, 0, 2),
		set("mpi://rte/lu/rc/9", "4-5", true, 0, 1),
		set("mpi://app/lu/old", "", false, 3, 2),
		set("mpi://app/lu/x/y", "0-1", true, 0, 0),
		set("mpi://app/lu/x", "0-1", true, 0, 0),
	}
	got := render(Tree(sets, ""))
	want := `mpi://app/lu [M]
├─ mpi://WORLD [-]
│  └─ mpi://app/lu/x [-]
│     └─ mpi://app/lu/x/y [-]
└─ mpi://rte/lu/rc/9 [D]
mpi://app/lu/old [-]
mpi://rte/lu/rc/10 [D]
`
	if got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

func TestShortNameAndAttrs(t *testing.T) {
	for in, want := range map[string]string{
		"mpi://app/lu/grid/a": "…/grid/a",
		"mpi://app/lu":        "mpi://app/lu",
		"mpi://rte/lu/rc/12":  "rc/12",
		"mpi://WORLD":         "mpi://WORLD",
		"bogus":               "bogus",
	} {
		if got := ShortName(in); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Attrs(set("x", "1", false, 3, 2)); got != "v3 e2 i" {
		t.Errorf("Attrs = %q", got)
	}
}
