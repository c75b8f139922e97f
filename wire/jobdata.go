package wire

import "slices"

// DeltaFrom is d as a change from old (JobData.Delta): the nodes whose
// ranks differ, and an entry without ranks for each node the job left.
func (d *JobData) DeltaFrom(old *JobData) JobData {
	out := *d
	out.Delta, out.Base, out.Placement = true, old.Gen, nil
	had := make(map[string]RankRanges, len(old.Placement))
	for _, pl := range old.Placement {
		had[pl.Node] = pl.Ranks
	}
	for _, pl := range d.Placement {
		if rr, ok := had[pl.Node]; !ok || !slices.Equal(rr, pl.Ranks) {
			out.Placement = append(out.Placement, pl)
		}
		delete(had, pl.Node)
	}
	for _, pl := range old.Placement {
		if _, left := had[pl.Node]; left {
			out.Placement = append(out.Placement, Placement{Node: pl.Node})
		}
	}
	return out
}

// Apply is the whole data that delta (made by DeltaFrom from d) stands
// for. The nodes keep d's order; nodes new to the job follow in the
// delta's order. The caller checks that delta.Base is d's generation.
func (d *JobData) Apply(delta *JobData) JobData {
	out := *delta
	out.Delta, out.Base = false, 0
	changed := make(map[string]RankRanges, len(delta.Placement))
	for _, pl := range delta.Placement {
		changed[pl.Node] = pl.Ranks
	}
	out.Placement = make([]Placement, 0, len(d.Placement)+len(delta.Placement))
	for _, pl := range d.Placement {
		if rr, ok := changed[pl.Node]; ok {
			delete(changed, pl.Node)
			pl.Ranks = rr
		}
		if len(pl.Ranks) > 0 {
			out.Placement = append(out.Placement, pl)
		}
	}
	for _, pl := range delta.Placement {
		if _, ok := changed[pl.Node]; ok && len(pl.Ranks) > 0 {
			out.Placement = append(out.Placement, pl)
		}
	}
	return out
}
