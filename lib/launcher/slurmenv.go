package launcher

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// Environment of a Slurm allocation (set by salloc, sbatch and srun).
const (
	EnvSlurmJobID        = "SLURM_JOB_ID"
	EnvSlurmNodeList     = "SLURM_JOB_NODELIST"
	EnvSlurmNodeListOld  = "SLURM_NODELIST" // older name, still set
	EnvSlurmTasksPerNode = "SLURM_TASKS_PER_NODE"
	EnvSlurmCPUsPerNode  = "SLURM_JOB_CPUS_PER_NODE"
	EnvSlurmCPUsOnNode   = "SLURM_CPUS_ON_NODE"
	EnvSlurmdNodeName    = "SLURMD_NODENAME" // set in batch scripts and srun tasks: the node it runs on
)

// MaxSlurmNodes bounds the expansion of a Slurm host list, so that a typo
// like h[0-99999999] fails instead of filling memory.
const MaxSlurmNodes = 1 << 16

// ExpandHostlist expands a Slurm host list expression into host names, in
// order, duplicates kept: `h[1-3,5],gpu[01-02],x` is h1 h2 h3 h5 gpu01
// gpu02 x. A range keeps the width of its first bound (`[01-10]` gives 01
// .. 10; `[8-10]` gives 8 9 10), and several bracket groups in one name
// multiply (`r[1-2]n[1-2]` is r1n1 r1n2 r2n1 r2n2), as in Slurm.
func ExpandHostlist(expr string) ([]string, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty host list")
	}
	var out []string
	items, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		if item == "" {
			return nil, fmt.Errorf("host list %q: empty entry", expr)
		}
		names, err := expandItem(item, MaxSlurmNodes-len(out))
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", expr, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTop splits at the commas outside brackets and checks the brackets
// pair up without nesting.
func splitTop(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i, c := range expr {
		switch c {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("host list %q: nested '[' at offset %d", expr, i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("host list %q: ']' without '[' at offset %d", expr, i)
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("host list %q: '[' is never closed", expr)
	}
	return append(items, expr[start:]), nil
}

// expandItem expands one name with any number of bracket groups, making
// at most limit names.
func expandItem(item string, limit int) ([]string, error) {
	if item[0] == '[' {
		return nil, fmt.Errorf("%q: a host name cannot start with '['", item)
	}
	names := []string{""}
	for rest := item; ; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			for i := range names {
				names[i] += rest
			}
			break
		}
		shut := strings.IndexByte(rest, ']') // splitTop checked the pairing
		prefix, set := rest[:open], rest[open+1:shut]
		rest = rest[shut+1:]
		vals, err := expandRanges(set, limit)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if len(names)*len(vals) > limit {
			return nil, fmt.Errorf("%q: more than %d hosts", item, MaxSlurmNodes)
		}
		next := make([]string, 0, len(names)*len(vals))
		for _, n := range names {
			for _, v := range vals {
				next = append(next, n+prefix+v)
			}
		}
		names = next
	}
	for _, n := range names {
		if err := CheckHost(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// expandRanges expands the inside of one bracket: `1-3,5,07-09`.
func expandRanges(set string, limit int) ([]string, error) {
	if set == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for _, r := range strings.Split(set, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := rangeBound(lo, r)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = rangeBound(hi, r); err != nil {
				return nil, err
			}
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", r)
		}
		if b-a >= uint64(limit-len(out)) {
			return nil, fmt.Errorf("range %q: more than %d hosts", r, MaxSlurmNodes)
		}
		width := len(lo)
		for v := a; v <= b; v++ {
			s := strconv.FormatUint(v, 10)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func rangeBound(s, r string) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("range %q: %q is not a number", r, s)
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("range %q: %q is too large", r, s)
	}
	return v, nil
}

// ParseCountList expands a Slurm per-node count list such as
// SLURM_TASKS_PER_NODE or SLURM_JOB_CPUS_PER_NODE: `2(x3),1` is 2 2 2 1.
// Counts are 1..MaxSlots; the list makes at most MaxSlurmNodes entries.
func ParseCountList(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty count list")
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		count, reps := item, "1"
		if c, r, ok := strings.Cut(item, "(x"); ok {
			if !strings.HasSuffix(r, ")") {
				return nil, fmt.Errorf("count list %q: %q: want N or N(xR)", s, item)
			}
			count, reps = c, strings.TrimSuffix(r, ")")
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > MaxSlots || strings.TrimLeft(count, "0123456789") != "" {
			return nil, fmt.Errorf("count list %q: %q: count %q is not a number between 1 and %d", s, item, count, MaxSlots)
		}
		k, err := strconv.Atoi(reps)
		if err != nil || k < 1 || strings.TrimLeft(reps, "0123456789") != "" {
			return nil, fmt.Errorf("count list %q: %q: repeat %q is not a positive number", s, item, reps)
		}
		if k > MaxSlurmNodes-len(out) {
			return nil, fmt.Errorf("count list %q: more than %d entries", s, MaxSlurmNodes)
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, nil
}

// SlurmAllocation is a Slurm job's nodes and where their slots came from.
type SlurmAllocation struct {
	JobID     string
	Nodes     []alloc.Node // in the order of the host list
	SlotsFrom string       // the variable the slot counts came from, or "default"
}

// ReadSlurmAllocation reads the allocation from the environment get. The
// host list is SLURM_JOB_NODELIST (else SLURM_NODELIST), expanded by
// ExpandHostlist; when that refuses it, hostnames (if not nil; the caller
// runs `scontrol show hostnames`, Slurm's own parser) gets a try. Slots are,
// as prterun and Hydra take them, SLURM_TASKS_PER_NODE; without it
// SLURM_JOB_CPUS_PER_NODE; without it SLURM_CPUS_ON_NODE for every node;
// else 1 per node (like a host without a count in --host).
//
// Errors name the variable and carry wire.ErrInvalid.
func ReadSlurmAllocation(get func(string) string, hostnames func(expr string) ([]string, error)) (SlurmAllocation, error) {
	a := SlurmAllocation{JobID: get(EnvSlurmJobID)}
	if a.JobID == "" {
		return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s is not set; run inside a Slurm allocation (salloc, sbatch) or choose another launcher", EnvSlurmJobID)
	}
	if strings.TrimLeft(a.JobID, "0123456789") != "" {
		return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s=%q is not a job id", EnvSlurmJobID, a.JobID)
	}
	listVar := EnvSlurmNodeList
	expr := get(listVar)
	if expr == "" {
		listVar = EnvSlurmNodeListOld
		expr = get(listVar)
	}
	if expr == "" {
		return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: job %s: neither %s nor %s is set; the allocation's nodes are unknown", a.JobID, EnvSlurmNodeList, EnvSlurmNodeListOld)
	}
	hosts, err := ExpandHostlist(expr)
	if err != nil && hostnames != nil {
		// Slurm's parser accepts some junk (scontrol expands "h[0-" to
		// "h]"): its answer counts only if every name is a host name, and
		// otherwise our error stands.
		if h, err2 := hostnames(expr); err2 == nil && len(h) > 0 && !slices.ContainsFunc(h, func(n string) bool { return CheckHost(n) != nil }) {
			hosts, err = h, nil
		}
	}
	if err != nil {
		return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s: %w", listVar, err)
	}
	if dup := firstDuplicate(hosts); dup != "" {
		return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s=%q names host %s twice", listVar, expr, dup)
	}
	slots := make([]int, len(hosts))
	a.SlotsFrom = "default"
	for i := range slots {
		slots[i] = 1
	}
	for _, v := range []string{EnvSlurmTasksPerNode, EnvSlurmCPUsPerNode} {
		s := get(v)
		if s == "" {
			continue
		}
		counts, err := ParseCountList(s)
		if err != nil {
			return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s: %w", v, err)
		}
		// More counts than hosts is tolerated (Slurm has produced such
		// lists, PRRTE ignores the rest); fewer leaves hosts without slots.
		if len(counts) < len(hosts) {
			return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s=%q gives %d counts for the %d hosts of %s=%q", v, s, len(counts), len(hosts), listVar, expr)
		}
		copy(slots, counts)
		a.SlotsFrom = v
		break
	}
	if a.SlotsFrom == "default" {
		if s := get(EnvSlurmCPUsOnNode); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > MaxSlots {
				return a, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %s=%q is not a number between 1 and %d", EnvSlurmCPUsOnNode, s, MaxSlots)
			}
			for i := range slots {
				slots[i] = n
			}
			a.SlotsFrom = EnvSlurmCPUsOnNode
		}
	}
	a.Nodes = make([]alloc.Node, len(hosts))
	for i, h := range hosts {
		a.Nodes[i] = alloc.Node{Name: h, Slots: slots[i]}
	}
	return a, nil
}

func firstDuplicate(names []string) string {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}

// SlurmSelf finds the node of the allocation this process runs on:
// SLURMD_NODENAME when set (batch scripts, srun tasks), else the host name
// or its first label. It returns -1 when this host is not a node of the
// allocation (salloc's shell runs where salloc ran, often a login node).
func SlurmSelf(a SlurmAllocation, nodeName, hostname string) int {
	cands := []string{nodeName}
	if nodeName == "" {
		short, _, _ := strings.Cut(hostname, ".")
		cands = []string{hostname, short}
	}
	for _, c := range cands {
		if i := slices.IndexFunc(a.Nodes, func(n alloc.Node) bool { return n.Name == c }); c != "" && i >= 0 {
			return i
		}
	}
	return -1
}

// SlurmNodes returns the nodes of a DVM over allocation a, the master's
// own first (its daemon runs in the master's process): its node of the
// allocation (self, from SlurmSelf), or, when it runs outside the
// allocation, this host (named hostname, else localhost) with 0 slots, so that nothing is
// placed there, as mpirun and Hydra place nothing on a login node.
func SlurmNodes(a SlurmAllocation, self int, hostname string) []alloc.Node {
	if self >= 0 {
		return MasterFirst(a.Nodes, self)
	}
	if hostname == "" {
		hostname = "localhost"
	}
	return append([]alloc.Node{{Name: hostname, Slots: 0}}, a.Nodes...)
}

// MasterFirst returns nodes with nodes[self] moved to the front (node 0 is
// the master's own node), the others in their order.
func MasterFirst(nodes []alloc.Node, self int) []alloc.Node {
	out := make([]alloc.Node, 0, len(nodes))
	out = append(out, nodes[self])
	out = append(out, nodes[:self]...)
	return append(out, nodes[self+1:]...)
}
