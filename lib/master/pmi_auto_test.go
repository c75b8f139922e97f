package master

import (
	"errors"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestPMISelect: what --pmi auto and --pmi pmix resolve to, by what the
// launcher found in the program and whether the job's daemons host PMIx.
func TestPMISelect(t *testing.T) {
	const prog = "/home/u/hello"
	ompi := "links libmpi.so.40 (Open MPI)"
	for _, tc := range []struct {
		name    string
		mode    string
		need    string
		without []string // nodes without PMIx
		want    string
		err     []string // substrings of the error, nil = none
	}{
		{"auto, Open MPI, PMIx everywhere", wire.PMIAuto, wire.PMINeedPMIx, nil, wire.PMIPMIx, nil},
		{"empty mode is auto", "", wire.PMINeedPMIx, nil, wire.PMIPMIx, nil},
		{"auto, MPICH, PMIx everywhere", wire.PMIAuto, wire.PMINeedPMI, nil, wire.PMIFD, nil},
		{"auto, MPICH, no PMIx", wire.PMIAuto, wire.PMINeedPMI, []string{"node0"}, wire.PMIFD, nil},
		{"auto, no MPI", wire.PMIAuto, wire.PMINeedNone, nil, wire.PMIFD, nil},
		{"auto, no MPI, no PMIx", wire.PMIAuto, wire.PMINeedNone, []string{"node0"}, wire.PMIFD, nil},
		{"auto, unknown (a script)", wire.PMIAuto, "", nil, wire.PMIFD, nil},
		{"auto, Open MPI, no PMIx", wire.PMIAuto, wire.PMINeedPMIx, []string{"node0"}, "",
			[]string{prog + " " + ompi + ", which speaks PMIx only", "the daemon of node node0 was built without PMIx support (libpmix-dev)", "make deps-openmpi", "go build -tags pmix", "mpicc.mpich", "--pmi none"}},
		{"auto, Open MPI, some nodes without", wire.PMIAuto, wire.PMINeedPMIx, []string{"node1", "node2", "node3", "node5"}, "",
			[]string{"the daemons of nodes node1, node2, node3 and 1 more were built without PMIx"}},
		{"pmix, PMIx everywhere", wire.PMIPMIx, "", nil, wire.PMIPMIx, nil},
		{"pmix, no PMIx", wire.PMIPMIx, "", []string{"node0", "node1"}, "",
			[]string{"--pmi pmix: the daemons of nodes node0, node1 were built without PMIx support", "go build -tags pmix"}},
		// Explicit modes are taken as they are, whatever the program.
		{"fd, Open MPI", wire.PMIFD, wire.PMINeedPMIx, []string{"node0"}, wire.PMIFD, nil},
		{"port", wire.PMIPort, "", nil, wire.PMIPort, nil},
		{"none, Open MPI", wire.PMINone, wire.PMINeedPMIx, []string{"node0"}, wire.PMINone, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &wire.JobLaunchReq{Argv: []string{prog}, PMI: tc.mode, PMINeed: tc.need}
			if tc.need == wire.PMINeedPMIx {
				b.PMIWhy = ompi
			}
			got, err := pmiSelect(b, tc.without)
			if tc.err == nil {
				if err != nil || got != tc.want {
					t.Fatalf("pmiSelect = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("pmiSelect = %q, want an error", got)
			}
			if !errors.Is(err, wire.ErrUnsupported) {
				t.Errorf("error %v is not ErrUnsupported", err)
			}
			for _, s := range tc.err {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q\nlacks %q", err, s)
				}
			}
		})
	}
}
