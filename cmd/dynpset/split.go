package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// splitJSON is `op split --json`.
type splitJSON struct {
	Job     string      `json:"job"`
	Op      string      `json:"op"` // "split"
	Set     operandJSON `json:"set"`
	Mode    string      `json:"mode"` // parts, ranks or node
	Parts   []partJSON  `json:"parts"`
	Defined bool        `json:"defined"` // stored by the master (--define)
}

type partJSON struct {
	Name    string `json:"name,omitempty"` // as given, or as the master named it; empty in a preview without names
	Size    int    `json:"size"`
	Members string `json:"members"`
	Node    string `json:"node,omitempty"` // --by-node
	// With --define: what the master stored.
	Version *uint32 `json:"version,omitempty"`
	Epoch   *uint32 `json:"epoch,omitempty"`
	Active  *bool   `json:"active,omitempty"`

	ranks wire.RankRanges
}

// splitReq is a checked command line of `op split`.
type splitReq struct {
	mode   string
	k      int
	lists  []wire.RankRanges
	names  []string // full names, one per part
	prefix string   // full name; parts are prefix/<i>
}

// parseSplit checks the flags of `op split` before anything is contacted.
func parseSplit(c *cli.Context) (splitReq, error) {
	var r splitReq
	modes := 0
	if c.IsSet("parts") {
		r.mode, r.k = wire.SplitParts, c.Int("parts")
		if r.k < 1 {
			return r, cliutil.Usagef("--parts %d: want a number of parts from 1 to the size of the set", r.k)
		}
		modes++
	}
	if ls := c.StringSlice("ranks"); len(ls) > 0 {
		r.mode = wire.SplitRanks
		for i, s := range ls {
			rr, err := psetview.ParseRanks(s)
			if err != nil {
				return r, cliutil.Usagef("--ranks (part %d): %v", i, err)
			}
			r.lists = append(r.lists, rr)
		}
		modes++
	}
	if c.Bool("by-node") {
		r.mode = wire.SplitNode
		modes++
	}
	if modes != 1 {
		return r, cliutil.Usagef("op split: give exactly one of --parts K, --ranks LIST (once per part) and --by-node")
	}
	r.names = c.StringSlice("name")
	r.prefix = c.String("prefix")
	if len(r.names) > 0 && r.prefix != "" {
		return r, cliutil.Usagef("--name names each part, --prefix names them PREFIX/<i>: give one of them")
	}
	if (len(r.names) > 0 || r.prefix != "") && !c.Bool("define") {
		return r, cliutil.Usagef("--name and --prefix only name sets defined with --define")
	}
	return r, nil
}

// fullName turns N into mpi://app/<app>/N unless it is a full name, and
// checks that it lies in the application's domain.
func fullName(flag, name, app string) (string, error) {
	if !strings.HasPrefix(name, "mpi://") {
		name = pset.AppName(app) + "/" + strings.TrimPrefix(name, "/")
	}
	n, err := pset.Parse(name)
	if err != nil {
		return "", &cliutil.ExitError{Code: cliutil.ExitUsage, Err: err}
	}
	if n.Kind != pset.KindApp || n.App != app {
		return "", cliutil.Usagef("%s %s: sets are defined in the application domain %s/...", flag, name, pset.AppName(app))
	}
	return n.String(), nil
}

// runSplit is `dynpset op split SET[@V] (--parts K | --ranks LIST... |
// --by-node)`: it shows the parts, computed here by the same algebra the
// master runs (lib/pset), and with --define has the master store them.
func runSplit(e *env, c *cli.Context) error {
	a, err := args(c, 2, "split SET[@V] (--parts K | --ranks LIST ... | --by-node)")
	if err != nil {
		return err
	}
	name, ver, err := parseRef(a[1])
	if err != nil {
		return err
	}
	r, err := parseSplit(c)
	if err != nil {
		return err
	}
	cl, err := e.attach(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	j, err := e.jobForName(c, cl, name)
	if err != nil {
		return err
	}
	for i, n := range r.names {
		if r.names[i], err = fullName("--name", n, j.App); err != nil {
			return err
		}
	}
	if r.prefix != "" {
		if r.prefix, err = fullName("--prefix", r.prefix, j.App); err != nil {
			return err
		}
	}
	sets, err := e.psets(cl, j.Job)
	if err != nil {
		return err
	}
	k := slices.IndexFunc(sets, func(s wire.PsetInfo) bool { return s.Name == name })
	if k < 0 {
		return failf("job %s (%s) has no process set %s; it has: %s", j.Job, j.App, name, setNames(sets))
	}
	in := sets[k]
	if ver >= 0 && uint32(ver) != in.Version {
		if uint32(ver) > in.Version {
			return failf("%s has versions 0 to %d; there is no version %d", name, in.Version, ver)
		}
		if in, err = getVersion(e, cl, j.Job, name, uint32(ver)); err != nil {
			if errors.Is(err, wire.ErrNotFound) {
				return failf("version %d of %s is no longer kept", ver, name)
			}
			return fail(err)
		}
	}
	out := splitJSON{Job: j.Job, Op: wire.OpSplit, Set: operandJSON{in.Name, in.Version, in.Size}, Mode: r.mode, Parts: []partJSON{}}
	parts, nodes, err := previewSplit(j, in, r)
	if err != nil {
		return err
	}
	for i, p := range parts {
		pj := partJSON{Size: p.Count(), Members: p.String(), ranks: p}
		switch {
		case len(r.names) > 0 && i < len(r.names):
			pj.Name = r.names[i]
		case r.prefix != "":
			pj.Name = fmt.Sprintf("%s/%d", r.prefix, i)
		}
		if nodes != nil {
			pj.Node = nodes[i]
		}
		out.Parts = append(out.Parts, pj)
	}
	if c.Bool("define") {
		if err := defineSplit(e, c, cl, j, sets, in, r, &out); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return e.writeJSON(out)
	}
	how := map[string]string{wire.SplitParts: fmt.Sprintf("into %d parts", r.k), wire.SplitRanks: "by rank lists", wire.SplitNode: "by node"}[r.mode]
	fmt.Fprintf(e.out, "split(%s@%d) %s = %s\n", in.Name, in.Version, how, plural(len(out.Parts), "part", "parts"))
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	for i, p := range out.Parts {
		fmt.Fprintf(tw, "  %d\t", i)
		if p.Node != "" {
			fmt.Fprintf(tw, "%s\t", p.Node)
		}
		fmt.Fprintf(tw, "%s\t(%s)", psetview.Short(p.ranks, 40), plural(p.Size, "rank", "ranks"))
		if p.Version != nil {
			fmt.Fprintf(tw, "\t%s version %d", p.Name, *p.Version)
		} else if p.Name != "" {
			fmt.Fprintf(tw, "\t%s", p.Name)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Defined {
		state := "inactive"
		if len(out.Parts) > 0 && *out.Parts[0].Active {
			state = "active"
		}
		fmt.Fprintf(e.out, "defined %s (%s)\n", plural(len(out.Parts), "set", "sets"), state)
	}
	return nil
}

// previewSplit computes the parts with lib/pset on a scratch registry that
// holds the set under its own name, so that errors read as the master's
// would. For --by-node the nodes come from the job's placement, which
// lists the live ranks in the DVM's node order, as the master uses them.
func previewSplit(j wire.JobInfo, in wire.PsetInfo, r splitReq) ([]wire.RankRanges, []string, error) {
	n, _, _ := pset.ParseRef(in.Name)
	if n.Kind == pset.KindDelta {
		return nil, nil, failf("cannot split %s: a delta set records a resource change and is read-only; split the set the change was applied to", in.Name)
	}
	if in.Size == 0 {
		return nil, nil, failf("%s@%d has no members to split", in.Name, in.Version)
	}
	reg, err := pset.New(j.App, in.Members.Ranks())
	if err != nil {
		return nil, nil, fail(err)
	}
	if n.Kind == pset.KindApp && !n.IsRoot() {
		root := pset.AppName(j.App)
		if _, err := reg.ApplyOp(pset.OpRequest{Op: pset.OpUnion, P1: root, P2: root, Target: in.Name}); err != nil {
			return nil, nil, fail(err)
		}
	}
	mode, err := pset.ParseSplitMode(r.mode)
	if err != nil {
		return nil, nil, fail(err)
	}
	req := pset.SplitRequest{Set: in.Name, Mode: mode, Parts: r.k, Ranks: r.lists, Active: new(bool)}
	if mode == pset.SplitByNode {
		req.Nodes = map[int]wire.RankRanges{}
		for i, pl := range j.Placement {
			req.Nodes[i] = pl.Ranks
		}
	}
	res, err := reg.Split(req)
	if err != nil {
		return nil, nil, fail(err)
	}
	var parts []wire.RankRanges
	for _, p := range res.Parts {
		m, err := reg.Members(p.Result.Name)
		if err != nil {
			return nil, nil, fail(err)
		}
		parts = append(parts, wire.RangesOf(m))
	}
	var nodes []string
	for _, i := range res.Nodes {
		nodes = append(nodes, j.Placement[i].Node)
	}
	if len(r.names) > 0 && len(r.names) != len(parts) {
		return nil, nil, cliutil.Usagef("%d --name given for %s", len(r.names), plural(len(parts), "part", "parts"))
	}
	return parts, nodes, nil
}

// defineSplit has the master store the parts. The rules of --define for
// the other operations hold: the parts are inactive unless --active, and
// a running application's active sets (or new active ones) need --force.
func defineSplit(e *env, c *cli.Context, cl *tool.Client, j wire.JobInfo, sets []wire.PsetInfo, in wire.PsetInfo, r splitReq, out *splitJSON) error {
	active := c.Bool("active")
	running := j.State == wire.JobStateRunning || j.State == wire.JobStateLaunching
	if running && !c.Bool("force") {
		for _, p := range out.Parts {
			if k := slices.IndexFunc(sets, func(s wire.PsetInfo) bool { return s.Name == p.Name }); p.Name != "" && k >= 0 && sets[k].Active {
				return failf("%s is an active set of running application %s: the application manages it (--force overrides)", p.Name, j.App)
			}
		}
		if active {
			return failf("an active set in running application %s takes part in its resource changes (Def. 2); --force defines the parts anyway", j.App)
		}
	}
	ctx, cancel := e.call()
	defer cancel()
	rep, err := cl.PsetOp(ctx, wire.PsetOpReq{Job: j.Job, Op: wire.OpSplit, P1: fmt.Sprintf("%s@%d", in.Name, in.Version), Mode: r.mode,
		K: uint32(r.k), Lists: r.lists, Names: r.names, Target: r.prefix, Active: &active})
	if err != nil {
		return fail(err)
	}
	if len(rep.Parts) != len(out.Parts) {
		// The job changed between the preview and the split (a node
		// lost its last rank): report what the master did.
		out.Parts = make([]partJSON, len(rep.Parts))
	}
	for i, p := range rep.Parts {
		d := &out.Parts[i]
		d.Name, d.Size, d.Members, d.ranks = p.Name, int(p.Size), p.Members.String(), p.Members
		d.Version, d.Epoch, d.Active = &p.Version, &p.Epoch, &p.Active
		if i < len(rep.Nodes) {
			d.Node = rep.Nodes[i]
		}
	}
	out.Defined = true
	return nil
}
