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
		{"auto, unknown (a script)", wire.PMIAuto, wire.PMINeedUnknown, nil, wire.PMIBoth, nil},
		{"auto, unknown, some nodes without PMIx", wire.PMIAuto, wire.PMINeedUnknown, []string{"node1"}, wire.PMIFD, nil},
		{"auto, not detected (an API client)", wire.PMIAuto, "", nil, wire.PMIFD, nil},
		{"fd+pmix, PMIx everywhere", wire.PMIBoth, "", nil, wire.PMIBoth, nil},
		{"fd+pmix, no PMIx", wire.PMIBoth, "", []string{"node0"}, "",
			[]string{"--pmi fd+pmix: the daemon of node node0 was built without PMIx support"}},
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

// openMPIRefusal is what the refusal of a change of an Open MPI job says.
var openMPIRefusal = []string{"job hello (dvm1.3) is an Open MPI job (its processes speak PMIx)", "not every process of it declared itself malleable", "cannot carry a resource change through to Open MPI", "DYNRT_PMIX_MALLEABLE (dynrt_pmix.h)", "session API"}

// TestStaticErr: a job whose processes began a PMI or PMIx session refuses
// resource changes, and says which MPI it is and what works instead,
// unless every live process of a PMIx job declared itself malleable.
func TestStaticErr(t *testing.T) {
	for _, tc := range []struct {
		name string
		pmi  *pmiJob
		want []string // substrings; nil = no error
	}{
		{"no PMI", nil, nil},
		{"PMI service never used", &pmiJob{info: &wire.PMIJob{Mode: wire.PMIFD}}, nil},
		{"PMIx service never used", &pmiJob{info: &wire.PMIJob{Mode: wire.PMIPMIx}}, nil},
		{"MPICH", &pmiJob{used: true, info: &wire.PMIJob{Mode: wire.PMIFD}},
			[]string{"job hello (dvm1.3) was launched as an MPI job without dynrt's session API", "MPI_Comm_spawn through PMI works"}},
		{"Open MPI", &pmiJob{used: true, info: &wire.PMIJob{Mode: wire.PMIPMIx}}, openMPIRefusal},
		{"PMIx, one live process declared", &pmiJob{used: true, info: &wire.PMIJob{Mode: wire.PMIPMIx}, malleable: map[uint32]bool{0: true}}, openMPIRefusal},
		{"PMIx, every live process declared", &pmiJob{used: true, info: &wire.PMIJob{Mode: wire.PMIPMIx}, malleable: map[uint32]bool{0: true, 2: true}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &job{app: "hello", ns: "dvm1.3", pmi: tc.pmi}
			// Ranks 0 and 2 run, rank 1 has exited (it need not declare).
			for _, st := range []string{wire.ProcStateRunning, wire.ProcStateExited, wire.ProcStateRunning} {
				j.procs.add(jproc{state: st})
			}
			err := j.staticErr()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("staticErr = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, wire.ErrState) {
				t.Fatalf("staticErr = %v, want ErrState", err)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("staticErr %q lacks %q", err, s)
				}
			}
		})
	}
}
