package psetview

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Marks are the classifications a tool shows next to a set.
type Marks struct {
	Domain     pset.Kind // KindWorld, KindApp, KindDelta (KindInvalid for names that do not parse)
	Root       bool      // the predefined mpi://app/<app>
	Delta      bool      // a delta set of a resource change (mpi://rte/<app>/rc/<n>)
	Malleable  bool      // in X_m(app) (Definition 2)
	RefCounted bool      // in X_c(U) for the delta U given to Classify (Definition 3)
	Empty      bool      // no members (an inactive set emptied by a change)
}

// Flags renders m as the short tags the tools print: "M" malleable, "C"
// reference counted, "D" delta, "-" for none.
func (m Marks) Flags() string {
	var parts []string
	if m.Malleable {
		parts = append(parts, "M")
	}
	if m.RefCounted {
		parts = append(parts, "C")
	}
	if m.Delta {
		parts = append(parts, "D")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// Classify computes the marks of every set of one job, by name. The sets
// must carry their members. delta names the delta set U for the
// reference-counted mark ("" = none marked).
//
// It follows lib/pset's reading of the definitions so that the tools show
// what the runtime acts on: only sets of the application domain count,
// sets of size 0 are left out, and "strictly contains" is meant by
// membership (two active sets with equal members are both malleable).
func Classify(sets []wire.PsetInfo, delta string) map[string]Marks {
	out := make(map[string]Marks, len(sets))
	var u wire.RankRanges
	haveU := false
	for _, s := range sets {
		n, err := pset.Parse(s.Name)
		m := Marks{Empty: s.Size == 0}
		if err == nil {
			m.Domain = n.Kind
			m.Root = n.IsRoot()
			m.Delta = n.Kind == pset.KindDelta
		}
		out[s.Name] = m
		if delta != "" && s.Name == delta {
			u, haveU = s.Members, true
		}
	}
	var active []wire.PsetInfo
	for _, s := range sets {
		if out[s.Name].Domain == pset.KindApp && s.Active && s.Size > 0 {
			active = append(active, s)
		}
	}
	for _, s := range active {
		maximal := true
		for _, t := range active {
			if t.Size > s.Size && SubsetOf(s.Members, t.Members) {
				maximal = false
				break
			}
		}
		if !maximal {
			continue
		}
		m := out[s.Name]
		m.Malleable = true
		m.RefCounted = haveU && Intersects(s.Members, u)
		out[s.Name] = m
	}
	return out
}

// Node is one set in the hierarchy.
type Node struct {
	Set      wire.PsetInfo
	Marks    Marks
	Children []*Node
}

// order is the tie-break among sets with equal members: the more general
// domain is the parent (WORLD, then the application's root set, then its
// other sets by depth and name, then delta sets).
func order(s wire.PsetInfo, m Marks) (int, int, string) {
	switch {
	case m.Domain == pset.KindWorld:
		return 0, 0, s.Name
	case m.Root:
		return 1, 0, s.Name
	case m.Domain == pset.KindApp:
		return 2, strings.Count(s.Name, "/"), s.Name
	case m.Delta:
		return 3, 0, s.Name
	}
	return 4, 0, s.Name
}

func less(a, b *Node) int {
	ak, ad, an := order(a.Set, a.Marks)
	bk, bd, bn := order(b.Set, b.Marks)
	if c := cmp.Compare(ak, bk); c != 0 {
		return c
	}
	if c := cmp.Compare(ad, bd); c != 0 {
		return c
	}
	if a.Marks.Delta && b.Marks.Delta {
		// rc/10 after rc/9
		if c := cmp.Compare(deltaNum(an), deltaNum(bn)); c != 0 {
			return c
		}
	}
	return cmp.Compare(an, bn)
}

func deltaNum(name string) uint64 {
	i := strings.LastIndexByte(name, '/')
	n, _ := strconv.ParseUint(name[i+1:], 10, 64)
	return n
}

// Tree arranges the sets of one job (with members) into a forest by the
// subset relation, as in thesis fig. 6.1: the parent of a set is the
// smallest other set that contains it; among sets with equal members the
// more general one (see order) is the parent, so mpi://WORLD holds
// mpi://app/<app> at launch. Empty sets become roots. Children are sorted
// by domain and name. delta is passed to Classify.
func Tree(sets []wire.PsetInfo, delta string) []*Node {
	marks := Classify(sets, delta)
	nodes := make([]*Node, len(sets))
	for i, s := range sets {
		nodes[i] = &Node{Set: s, Marks: marks[s.Name]}
	}
	// before reports whether a may be an ancestor of b: strictly more
	// members, or equal members and earlier in the order.
	before := func(a, b *Node) bool {
		if a.Set.Size != b.Set.Size {
			return a.Set.Size > b.Set.Size
		}
		return less(a, b) < 0
	}
	var roots []*Node
	for _, s := range nodes {
		var parent *Node
		if s.Set.Size > 0 {
			for _, t := range nodes {
				if t == s || t.Set.Size == 0 || !before(t, s) || !SubsetOf(s.Set.Members, t.Set.Members) {
					continue
				}
				// the tightest candidate: fewest members, then the
				// latest in the order (closest to s)
				if parent == nil || t.Set.Size < parent.Set.Size || (t.Set.Size == parent.Set.Size && less(t, parent) > 0) {
					parent = t
				}
			}
		}
		if parent == nil {
			roots = append(roots, s)
		} else {
			parent.Children = append(parent.Children, s)
		}
	}
	var sortAll func([]*Node)
	sortAll = func(ns []*Node) {
		slices.SortFunc(ns, less)
		for _, n := range ns {
			sortAll(n.Children)
		}
	}
	sortAll(roots)
	return roots
}

// Line is one row of a rendered tree.
type Line struct {
	Prefix string // tree drawing ("├─ ", "│  └─ ", ...)
	Depth  int
	Node   *Node
}

// Lines flattens a forest into display rows, depth first.
func Lines(roots []*Node) []Line {
	var out []Line
	var walk func(ns []*Node, indent string, depth int)
	walk = func(ns []*Node, indent string, depth int) {
		for i, n := range ns {
			last := i == len(ns)-1
			branch, next := "├─ ", "│  "
			if last {
				branch, next = "└─ ", "   "
			}
			if depth == 0 {
				branch, next = "", ""
			}
			out = append(out, Line{Prefix: indent + branch, Depth: depth, Node: n})
			walk(n.Children, indent+next, depth+1)
		}
	}
	walk(roots, "", 0)
	return out
}

// ShortName strips the application's domain prefix for narrow displays:
// mpi://app/lu/grid → …/grid, mpi://rte/lu/rc/3 → rc/3. Other names are
// returned unchanged.
func ShortName(name string) string {
	n, err := pset.Parse(name)
	if err != nil {
		return name
	}
	switch {
	case n.Kind == pset.KindApp && n.Sub != "":
		return "…/" + n.Sub
	case n.Kind == pset.KindDelta:
		return "rc/" + strconv.FormatUint(n.RC, 10)
	}
	return name
}

// Attrs renders the thesis's cached attributes of fig. 6.1 compactly:
// "v2 e1 a" (a = active, i = inactive).
func Attrs(s wire.PsetInfo) string {
	a := "a"
	if !s.Active {
		a = "i"
	}
	return "v" + strconv.FormatUint(uint64(s.Version), 10) + " e" + strconv.FormatUint(uint64(s.Epoch), 10) + " " + a
}
