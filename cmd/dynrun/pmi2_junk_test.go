package main

import "testing"

// TestPMI2GarbageCh3: MPICH 4.0.x's PMI-2 client sends 6 bytes of stale
// buffer after each request; after a longer request they begin with its
// ';', which must not be read as an escaped ';;'. Rank 0 of 12 contacts
// ranks 11, 10, 9, ... in turn (testdata/mpi/p2p_desc.c): with ch3 each
// rank on another node is found through its business card in PMI, and the
// get for P9's card follows the one for P10's. Before the fix that get
// found nothing and MPI failed ("Failure during collective" in MPICH's own
// comm/cmsplit2), while the same program passes under mpiexec.hydra. Both
// ch3 builds, on a private DVM of 2 nodes and across a warm DVM's 4.
func TestPMI2GarbageCh3(t *testing.T) {
	builds := ch3Builds(t)
	placements := dvmPlacements(t, "3")
	placements["private"] = []string{"--nodes", "2", "--slots", "8"}
	placements["warm"] = append(placements["warm"], "--oversubscribe") // 8 slots
	const want = " No Errors\n"
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			prog := compileMPI(t, b, "p2p_desc")
			if code, out, errOut := runLauncher(t, nil, b.hydra, "-n", "12", prog); code != 0 || out != want {
				t.Fatalf("under Hydra: exit %d, stdout %q, stderr %q; the test expects exit 0 and %q", code, out, errOut, want)
			}
			for where, args := range placements {
				code, out, errOut := runLauncher(t, nil, append(append([]string{bin}, args...), "-n", "12", prog)...)
				if code != 0 || out != want || errOut != "" {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want Hydra's exit 0 and %q", where, code, out, errOut, want)
				}
			}
		})
	}
}
