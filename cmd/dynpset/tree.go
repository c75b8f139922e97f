package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/wire"
)

// treeJSON is one job's hierarchy in `tree --json`.
type treeJSON struct {
	Job   string    `json:"job"`
	App   string    `json:"app"`
	Delta string    `json:"refcounted_for,omitempty"`
	Sets  []setJSON `json:"sets"` // roots; each holds its children
}

func nodeJSONOf(j wire.JobInfo, n *psetview.Node, delta string) setJSON {
	out := toSetJSON(j, n.Set, n.Marks, delta)
	for _, ch := range n.Children {
		out.Children = append(out.Children, nodeJSONOf(j, ch, delta))
	}
	return out
}

func runTree(e *env, c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
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
	out := []treeJSON{}
	forests := make([][]*psetview.Node, len(js))
	deltas := map[string]string{}
	for i, j := range js {
		sets, delta, err := e.marked(c, cl, j)
		if err != nil {
			return err
		}
		deltas[j.Job] = delta
		forests[i] = psetview.Tree(sets, delta)
		t := treeJSON{Job: j.Job, App: j.App, Delta: delta, Sets: []setJSON{}}
		for _, n := range forests[i] {
			t.Sets = append(t.Sets, nodeJSONOf(j, n, delta))
		}
		out = append(out, t)
	}
	if c.Bool("json") {
		return e.writeJSON(out)
	}
	if len(js) == 0 {
		fmt.Fprintf(e.out, "no live job in DVM %s\n", cl.Info().ID)
		return nil
	}
	for i, j := range js {
		if i > 0 {
			fmt.Fprintln(e.out)
		}
		fmt.Fprintf(e.out, "job %s (%s), %s\n", j.Job, j.App, plural(int(j.Size), "process", "processes"))
		tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
		for _, l := range psetview.Lines(forests[i]) {
			s := l.Node.Set
			fmt.Fprintf(tw, "  %s%s\t%d\t%s\t%s\t%s\n", l.Prefix, s.Name, s.Size, psetview.Attrs(s), l.Node.Marks.Flags(), psetview.Short(s.Members, 32))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.out, "columns: name, size, v version e epoch a active/i inactive, marks, members")
	fmt.Fprintln(e.out, legend(js, deltas))
	return nil
}
