//go:build pmix

package pmix

import (
	"errors"
	"fmt"
)

func (j *Job) app(rank uint32) uint32 {
	if int(rank) < len(j.RankApp) {
		return j.RankApp[rank]
	}
	return 0
}

// validate reports what is wrong with j, if anything.
func (j *Job) validate() error {
	switch {
	case j.Nspace == "":
		return errors.New("pmix: job without a namespace")
	case j.Size == 0:
		return fmt.Errorf("pmix: job %s has no processes", j.Nspace)
	case len(j.RankNode) != int(j.Size):
		return fmt.Errorf("pmix: job %s: %d ranks placed, size %d", j.Nspace, len(j.RankNode), j.Size)
	case j.Node < -1 || j.Node >= len(j.Nodes):
		return fmt.Errorf("pmix: job %s: node index %d out of %d nodes", j.Nspace, j.Node, len(j.Nodes))
	}
	for r, n := range j.RankNode {
		if n < 0 || n >= len(j.Nodes) {
			return fmt.Errorf("pmix: job %s: rank %d on node index %d out of %d nodes", j.Nspace, r, n, len(j.Nodes))
		}
	}
	return nil
}
