package report

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dynrt/dynrt/wire"
)

// Median of xs (0 for none). Zeros count as values: callers pass only the
// values that apply.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// group is a set of changes sharing a key, in key order.
type group struct {
	key     [3]int
	changes []Change
}

// groupBy collects the finalized changes of type typ by key.
func groupBy(changes []Change, typ string, key func(Change) [3]int) []group {
	idx := map[[3]int]int{}
	var gs []group
	for _, c := range changes {
		if c.Type != typ || c.Status != wire.RCFinalized {
			continue
		}
		k := key(c)
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, group{key: k})
		}
		gs[i].changes = append(gs[i].changes, c)
	}
	slices.SortFunc(gs, func(a, b group) int {
		for i := range a.key {
			if c := cmp.Compare(a.key[i], b.key[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	return gs
}

// med is the median of f over the changes where f is set (> 0).
func med(cs []Change, f func(Change) float64) float64 {
	var xs []float64
	for _, c := range cs {
		if v := f(c); v > 0 {
			xs = append(xs, v)
		}
	}
	return Median(xs)
}

func cell(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func blockingKey(b bool) int {
	if b {
		return 1
	}
	return 0
}

func bName(k int) string {
	if k == 1 {
		return "b"
	}
	return "nb"
}

// Tables writes the summary of the changes: thesis table 8.2 (addition) and
// 8.3 (subtraction) as rows per n_delta, then the per-phase overheads of
// figures 8.2/8.3 as rows per (n_start or n_dest, n_delta). Every value is
// the median over the changes of that row, in milliseconds; "-" when the
// step does not apply or was not seen. Every output line starts with
// prefix ("" keeps the tables apart from JSON lines in one stream).
func Tables(w io.Writer, changes []Change, prefix string) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	line := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }

	fmt.Fprintln(tw, "Table 8.2 shape: resource addition in the runtime (median ms since the request)")
	line("n_delta", "accept", "runs", "announced", "all started", "accept published", "confirmed", "total (FINALIZED)")
	for _, g := range groupBy(changes, wire.RCAdd, func(c Change) [3]int { return [3]int{c.N, blockingKey(c.Blocking)} }) {
		cs := g.changes
		line(strconv.Itoa(g.key[0]), bName(g.key[1]), strconv.Itoa(len(cs)),
			cell(med(cs, func(c Change) float64 { return c.AnnouncedMS })),
			cell(med(cs, func(c Change) float64 { return c.StartedMS })),
			cell(med(cs, func(c Change) float64 { return c.AcceptedMS })),
			cell(med(cs, func(c Change) float64 { return c.ConfirmedMS })),
			cell(med(cs, Change.TotalMS)))
	}
	line()
	fmt.Fprintln(tw, "Table 8.3 shape: resource subtraction in the runtime (median ms since the request)")
	line("n_delta", "accept", "runs", "announced (queryable)", "accept published", "FINALIZED", "total (all exited)")
	for _, g := range groupBy(changes, wire.RCSub, func(c Change) [3]int { return [3]int{c.N, blockingKey(c.Blocking)} }) {
		cs := g.changes
		line(strconv.Itoa(g.key[0]), bName(g.key[1]), strconv.Itoa(len(cs)),
			cell(med(cs, func(c Change) float64 { return c.AnnouncedMS })),
			cell(med(cs, func(c Change) float64 { return c.AcceptedMS })),
			cell(med(cs, func(c Change) float64 { return c.FinalizedMS })),
			cell(med(cs, Change.TotalMS)))
	}
	line()
	phases := func(title, nName string, typ string, key func(Change) int) {
		fmt.Fprintln(tw, title)
		line(nName, "n_delta", "accept", "runs", "phase 1", "req+query", "phase 2", "phase 3", "comm create", "app overhead")
		for _, g := range groupBy(changes, typ, func(c Change) [3]int { return [3]int{key(c), c.N, blockingKey(c.Blocking)} }) {
			cs := g.changes
			line(strconv.Itoa(g.key[0]), strconv.Itoa(g.key[1]), bName(g.key[2]), strconv.Itoa(len(cs)),
				cell(med(cs, func(c Change) float64 { return c.Phase1MS })),
				cell(med(cs, func(c Change) float64 { return c.QueryMS })),
				cell(med(cs, func(c Change) float64 { return c.Phase2MS })),
				cell(med(cs, func(c Change) float64 { return c.Phase3MS })),
				cell(med(cs, func(c Change) float64 { return c.CommMS })),
				cell(med(cs, func(c Change) float64 { return c.OverheadMS })))
		}
		line()
	}
	phases("Figure 8.2 shape: phases of resource addition (median ms)", "n_start", wire.RCAdd, func(c Change) int { return c.From })
	phases("Figure 8.3 shape: phases of resource subtraction (median ms)", "n_dest", wire.RCSub, func(c Change) int { return c.To })
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if l == "" {
			continue
		}
		if _, err := io.WriteString(w, prefix+strings.TrimRight(l, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}
