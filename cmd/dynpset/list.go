package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/wire"
)

// setJSON describes one set in `list --json` and `tree --json`. Field
// names are part of dynpset's interface (docs/dynpset.md): add, never
// rename.
type setJSON struct {
	Job           string            `json:"job"`
	App           string            `json:"app"`
	Name          string            `json:"name"`
	Domain        string            `json:"domain"` // world, app, delta
	Size          uint32            `json:"size"`
	Version       uint32            `json:"version"`
	Epoch         uint32            `json:"epoch"`
	Active        bool              `json:"active"`
	Malleable     bool              `json:"malleable"`
	RefCounted    bool              `json:"refcounted"`
	Delta         bool              `json:"delta"`
	RefCountedFor string            `json:"refcounted_for,omitempty"` // the delta set U of the refcounted mark
	Hints         map[string]string `json:"hints,omitempty"`
	Members       string            `json:"members"` // compact ranks, e.g. "0-7,9"
	Children      []setJSON         `json:"children,omitempty"`
}

func domainName(k pset.Kind) string {
	switch k {
	case pset.KindWorld:
		return "world"
	case pset.KindApp:
		return "app"
	case pset.KindDelta:
		return "delta"
	}
	return "other"
}

func toSetJSON(j wire.JobInfo, s wire.PsetInfo, m psetview.Marks, delta string) setJSON {
	out := setJSON{
		Job: j.Job, App: j.App, Name: s.Name, Domain: domainName(m.Domain), Size: s.Size, Version: s.Version,
		Epoch: s.Epoch, Active: s.Active, Malleable: m.Malleable, RefCounted: m.RefCounted, Delta: m.Delta,
		Hints: s.Hints, Members: s.Members.String(),
	}
	if m.Malleable {
		out.RefCountedFor = delta
	}
	return out
}

// inDomain filters by the --domain value.
func inDomain(domain string, m psetview.Marks) bool {
	switch domain {
	case "mpi":
		return m.Domain == pset.KindWorld
	case "app":
		return m.Domain == pset.KindApp
	case "rte":
		return m.Domain == pset.KindDelta
	}
	return true
}

func runList(e *env, c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	domain := strings.ToLower(c.String("domain"))
	switch domain {
	case "all", "mpi", "app", "rte":
	default:
		return cliutil.Usagef("--domain %q: want all, mpi, app or rte", c.String("domain"))
	}
	cl, err := e.attach(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	js, err := e.selectJobs(c, cl)
	if err != nil {
		return err
	}
	rows := []setJSON{}
	deltas := map[string]string{}
	for _, j := range js {
		sets, delta, err := e.marked(c, cl, j)
		if err != nil {
			return err
		}
		deltas[j.Job] = delta
		marks := psetview.Classify(sets, delta)
		for _, s := range sets {
			if inDomain(domain, marks[s.Name]) {
				rows = append(rows, toSetJSON(j, s, marks[s.Name], delta))
			}
		}
	}
	if c.Bool("json") {
		return e.writeJSON(rows)
	}
	if len(js) == 0 {
		fmt.Fprintf(e.out, "no live job in DVM %s\n", cl.Info().ID)
		return nil
	}
	tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tSIZE\tVER\tEPOCH\tACTIVE\tMARKS\tHINTS")
	for _, r := range rows {
		m := psetview.Marks{Malleable: r.Malleable, RefCounted: r.RefCounted, Delta: r.Delta}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\n", r.Job, r.Name, r.Size, r.Version, r.Epoch, yesNo(r.Active), m.Flags(), len(r.Hints))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.out, legend(js, deltas))
	return nil
}

// legend explains the marks, naming the delta set U of the C mark.
func legend(js []wire.JobInfo, deltas map[string]string) string {
	var us []string
	for _, j := range js {
		if d := deltas[j.Job]; d != "" {
			us = append(us, d)
		}
	}
	l := "marks: M malleable (Def. 2), C reference counted (Def. 3"
	if len(us) > 0 {
		l += " w.r.t. " + strings.Join(us, ", ")
	} else {
		l += "; no delta set yet"
	}
	return l + "), D delta set"
}
