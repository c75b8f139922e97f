//go:build pmix

package master

import (
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestPMIxPublishPersistence: PMIx_Publish's PMIX_PERSISTENCE is honoured
// by the DVM's name service (testdata/pmix/persist.c). A job of 2 ranks on
// 2 virtual nodes: rank 0 publishes with FIRST_READ, PROC, APP and INDEF;
// rank 1 finds the PROC and APP names while rank 0 lives, the PROC name
// gone once rank 0 has ended and the APP name still there. A later job
// finds the FIRST_READ name once and then no more, the APP and PROC names
// gone with their job, the INDEF name still there. Before, every
// directive was dropped and all four names went with their job.
func TestPMIxPublishPersistence(t *testing.T) {
	prog := pmixProgram(t, "persist")
	d := startDVM(t, 2, 2)
	prefix := "persist-" + d.mark
	pub, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "pub", prefix}, N: 2, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
	if end.Code != 0 {
		t.Fatalf("pub job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, pub.Job))
	}
	checkLines(t, "pub job: ", lines(d, pub.Job), []string{
		"alive ap: value-ap", "alive pr: value-pr",
		"ended ap: value-ap", "ended pr: NOT-FOUND",
	})
	get, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "get", prefix}, N: 1, PMI: wire.PMIPMIx})
	if end.Code != 0 {
		t.Fatalf("get job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, get.Job))
	}
	checkLines(t, "get job: ", lines(d, get.Job), []string{
		"1 fr: value-fr", "2 fr: NOT-FOUND", "3 ap: NOT-FOUND", "4 pr: NOT-FOUND", "5 ix: value-ix",
	})
}
