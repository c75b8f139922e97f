package session

import (
	"context"
	"strconv"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Names of the predefined process sets (DESIGN §4).
const (
	World  = pset.NameWorld  // the processes started at launch
	Self   = pset.NameSelf   // the caller alone
	Shared = pset.NameShared // the caller's job's processes on its node
)

// AppSet returns the name of the set holding every process of application
// app: mpi://app/<app>.
func AppSet(app string) string { return pset.AppName(app) }

// Pset describes one version of a process set.
type Pset struct {
	Name    string            // set name (URI)
	Job     string            // job the member ranks belong to
	Version uint32            // mpi_ps_version: grows whenever the members change
	Epoch   uint32            // mpi_ps_epoch
	Active  bool              // mpi_ps_active
	Size    int               // mpi_size: number of members
	Hints   map[string]string // mpi_ps_sched_* hints, keys without the prefix
	Members wire.RankRanges   // member ranks
	Defined time.Time         // when this version was defined (zero for SELF and SHARED)
}

// Info returns the set's attributes as an MPI info object would name them:
// mpi_size, mpi_ps_version, mpi_ps_epoch, mpi_ps_active and one
// mpi_ps_sched_<hint> per hint.
func (p Pset) Info() map[string]string {
	m := map[string]string{
		"mpi_size":       strconv.Itoa(p.Size),
		"mpi_ps_version": strconv.FormatUint(uint64(p.Version), 10),
		"mpi_ps_epoch":   strconv.FormatUint(uint64(p.Epoch), 10),
		"mpi_ps_active":  strconv.FormatBool(p.Active),
	}
	for k, v := range p.Hints {
		m[pset.SchedPrefix+k] = v
	}
	return m
}

func psetOf(in *wire.PsetInfo) Pset {
	p := Pset{
		Name: in.Name, Job: in.Job, Version: in.Version, Epoch: in.Epoch, Active: in.Active, Size: int(in.Size),
		Hints: in.Hints, Members: in.Members,
	}
	if in.Time != 0 {
		p.Defined = time.Unix(0, in.Time)
	}
	return p
}

// NumPsets returns how many process sets the caller can name: the
// predefined ones and those of its job. It also takes the snapshot that
// PsetName indexes, so that a loop over 0..n-1 sees one consistent list.
func (s *Session) NumPsets(ctx context.Context) (int, error) {
	names, err := s.listPsets(ctx)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.psets = names
	s.mu.Unlock()
	return len(names), nil
}

// PsetName returns the n-th set name (0-based) of the list NumPsets last
// counted, in name order (a first call without NumPsets takes the
// snapshot).
func (s *Session) PsetName(ctx context.Context, n int) (string, error) {
	s.mu.Lock()
	names := s.psets
	s.mu.Unlock()
	if names == nil {
		if _, err := s.NumPsets(ctx); err != nil {
			return "", err
		}
		s.mu.Lock()
		names = s.psets
		s.mu.Unlock()
	}
	if n < 0 || n >= len(names) {
		return "", wire.Errorf(wire.ErrInvalid, "session: no process set number %d (there are %d)", n, len(names))
	}
	return names[n], nil
}

func (s *Session) listPsets(ctx context.Context) ([]string, error) {
	var l wire.PsetList
	if err := s.call(ctx, wire.KindPsetList, &wire.PsetListReq{}, &l); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(l.Sets))
	for _, p := range l.Sets {
		names = append(names, p.Name)
	}
	return names, nil
}

// PsetInfo describes the latest version of the named set, members
// included; "name@version" names an earlier version. The daemon answers
// from its copy of the job's sets.
func (s *Session) PsetInfo(ctx context.Context, name string) (Pset, error) {
	var in wire.PsetInfo
	if err := s.call(ctx, wire.KindPsetGet, &wire.PsetGetReq{Name: name, Members: true}, &in); err != nil {
		return Pset{}, err
	}
	return psetOf(&in), nil
}

// Psets describes the latest version of every set the caller can name,
// members included, in name order.
func (s *Session) Psets(ctx context.Context) ([]Pset, error) {
	var l wire.PsetList
	if err := s.call(ctx, wire.KindPsetList, &wire.PsetListReq{Members: true}, &l); err != nil {
		return nil, err
	}
	out := make([]Pset, len(l.Sets))
	for i := range l.Sets {
		out[i] = psetOf(&l.Sets[i])
	}
	return out, nil
}
