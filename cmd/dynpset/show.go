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

// showJSON is `show --json`.
type showJSON struct {
	setJSON
	Newest  uint32        `json:"newest_version"`
	Nodes   []nodeJSON    `json:"nodes"`
	History []versionJSON `json:"history"`
}

type nodeJSON struct {
	Node  string `json:"node"`
	Ranks string `json:"ranks"`
	Count int    `json:"count"`
}

type versionJSON struct {
	Version uint32 `json:"version"`
	Epoch   uint32 `json:"epoch"`
	Size    uint32 `json:"size"`
	Members string `json:"members"`
	Added   string `json:"added,omitempty"`   // ranks that joined since the previous version
	Removed string `json:"removed,omitempty"` // ranks that left
	Pruned  bool   `json:"pruned,omitempty"`  // membership no longer kept by the master

	ranks wire.RankRanges
}

// parseRef validates NAME[@VERSION] for a tool: a bad spelling is a usage
// error, and SELF/SHARED differ per process.
func parseRef(ref string) (name string, version int, err error) {
	n, v, err := pset.ParseRef(ref)
	if err != nil {
		return "", 0, &cliutil.ExitError{Code: cliutil.ExitUsage, Err: err}
	}
	if n.Kind == pset.KindSelf || n.Kind == pset.KindShared {
		return "", 0, cliutil.Usagef("%s differs per process and means nothing to a tool; name a stored set", n)
	}
	return n.String(), v, nil
}

func runShow(e *env, c *cli.Context) error {
	a, err := args(c, 1, "NAME[@VERSION]")
	if err != nil {
		return err
	}
	name, version, err := parseRef(a[0])
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
	sets, err := e.psets(cl, j.Job)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(sets, func(s wire.PsetInfo) bool { return s.Name == name })
	if i < 0 {
		return failf("job %s (%s) has no process set %s; it has: %s", j.Job, j.App, name, setNames(sets))
	}
	latest := sets[i]
	cur := latest
	if version >= 0 && uint32(version) != latest.Version {
		if uint32(version) > latest.Version {
			return failf("%s has versions 0 to %d; there is no version %d", name, latest.Version, version)
		}
		if cur, err = getVersion(e, cl, j.Job, name, uint32(version)); err != nil {
			if errors.Is(err, wire.ErrNotFound) {
				return failf("version %d of %s is no longer kept (versions up to %d exist)", version, name, latest.Version)
			}
			return fail(err)
		}
	}
	delta, err := markDelta(c, j, sets)
	if err != nil {
		return err
	}
	marks := psetview.Classify(sets, delta)
	if cur.Version != latest.Version {
		// Marks describe the sets as they are now: only the newest version
		// takes part in the definitions.
		marks = map[string]psetview.Marks{name: {Domain: marks[name].Domain, Delta: marks[name].Delta}}
	}
	out := showJSON{setJSON: toSetJSON(j, cur, marks[name], delta), Newest: latest.Version, Nodes: []nodeJSON{}}
	for _, pl := range j.Placement {
		if on := psetview.Intersection(cur.Members, pl.Ranks); len(on) > 0 {
			out.Nodes = append(out.Nodes, nodeJSON{Node: pl.Node, Ranks: on.String(), Count: on.Count()})
		}
	}
	var prev wire.RankRanges
	havePrev := false
	for v := uint32(0); v <= latest.Version; v++ {
		in := latest
		if v != latest.Version {
			if in, err = getVersion(e, cl, j.Job, name, v); err != nil {
				if errors.Is(err, wire.ErrNotFound) {
					out.History = append(out.History, versionJSON{Version: v, Pruned: true})
					havePrev = false
					continue
				}
				return fail(err)
			}
		}
		h := versionJSON{Version: v, Epoch: in.Epoch, Size: in.Size, Members: in.Members.String(), ranks: in.Members}
		if havePrev {
			h.Added = psetview.Difference(in.Members, prev).String()
			h.Removed = psetview.Difference(prev, in.Members).String()
		}
		prev, havePrev = in.Members, true
		out.History = append(out.History, h)
	}
	if c.Bool("json") {
		return e.writeJSON(out)
	}
	w := e.out
	fmt.Fprintf(w, "name      %s\n", out.Name)
	fmt.Fprintf(w, "job       %s (%s)\n", out.Job, out.App)
	fmt.Fprintf(w, "version   %d (newest %d)   epoch %d   active %s   size %d\n", out.Version, out.Newest, out.Epoch, yesNo(out.Active), out.Size)
	fmt.Fprintf(w, "marks     %s\n", describeMarks(marks[name], delta))
	fmt.Fprintf(w, "members   %s\n", psetview.Short(cur.Members, 0))
	if len(out.Nodes) == 0 {
		fmt.Fprintf(w, "nodes     none of its members is running\n")
	}
	for i, n := range out.Nodes {
		label := "          "
		if i == 0 {
			label = "nodes     "
		}
		fmt.Fprintf(w, "%s%s: %s (%d)\n", label, n.Node, n.Ranks, n.Count)
	}
	if len(cur.Hints) > 0 {
		keys := make([]string, 0, len(cur.Hints))
		for k := range cur.Hints {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pset.SchedPrefix + k + "=" + cur.Hints[k]
		}
		fmt.Fprintf(w, "hints     %s\n", strings.Join(parts, " "))
	}
	fmt.Fprintln(w, "history")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VER\tEPOCH\tSIZE\tCHANGE\tMEMBERS")
	for _, h := range out.History {
		if h.Pruned {
			fmt.Fprintf(tw, "  %d\t-\t-\t(no longer kept)\t\n", h.Version)
			continue
		}
		change := "created"
		if h.Version > 0 {
			change = describeChange(h)
		}
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\t%s\n", h.Version, h.Epoch, h.Size, change, psetview.Short(h.ranks, 40))
	}
	return tw.Flush()
}

func describeChange(h versionJSON) string {
	var parts []string
	if h.Added != "" {
		parts = append(parts, "+"+h.Added)
	}
	if h.Removed != "" {
		parts = append(parts, "-"+h.Removed)
	}
	if len(parts) == 0 {
		return "?" // previous version unknown, or members unchanged
	}
	return strings.Join(parts, " ")
}

func describeMarks(m psetview.Marks, delta string) string {
	var parts []string
	if m.Malleable {
		parts = append(parts, "malleable")
	}
	if m.RefCounted {
		parts = append(parts, "reference counted w.r.t. "+delta)
	}
	if m.Delta {
		parts = append(parts, "delta set")
	}
	if m.Root {
		parts = append(parts, "application root")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func getVersion(e *env, cl *tool.Client, job, name string, v uint32) (wire.PsetInfo, error) {
	ctx, cancel := e.call()
	defer cancel()
	return cl.Pset(ctx, wire.PsetGetReq{Job: job, Name: name, Version: &v, Members: true})
}
