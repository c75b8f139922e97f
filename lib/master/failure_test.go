package master

import (
	"errors"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestDecideLoss: what a loss of a shrink job does, by the job's state
// (docs/rc.md "Failures as changes").
func TestDecideLoss(t *testing.T) {
	cases := []struct {
		name string
		v    lossView
		act  lossAct
		why  string // part of the reason the job ends
	}{
		{"idle job: a failure change", lossView{live: 3}, lossStart, ""},
		{"job being killed: judged as usual", lossView{killing: true, live: 3}, lossJudge, ""},
		{"being killed wins over every rank lost", lossView{killing: true}, lossJudge, ""},
		{"every rank lost", lossView{live: 0}, lossEnd, "every process of the job was lost"},
		{"MPI job through PMI", lossView{static: "launched as an MPI job", live: 3}, lossEnd, "cannot shrink: launched as an MPI job"},
		{"static and every rank lost: static says more", lossView{static: "MPI"}, lossEnd, "cannot shrink"},
		{"failure change not yet announced: fold", lossView{live: 2, cur: "failure-null"}, lossFold, ""},
		{"another change in flight: wait ahead of the queue", lossView{live: 2, cur: "other"}, lossWait, ""},
		{"every rank lost while a change is in flight", lossView{cur: "other"}, lossEnd, "every process"},
	}
	for _, c := range cases {
		act, why := decideLoss(c.v)
		if act != c.act || !strings.Contains(why, c.why) || (c.why == "" && why != "") {
			t.Errorf("%s: %v %q, want %v %q", c.name, act, why, c.act, c.why)
		}
	}
}

// TestFailurePolicy: the policy of a launch request, with keep-going as
// the continue policy's older name.
func TestFailurePolicy(t *testing.T) {
	cases := []struct {
		req  wire.JobLaunchReq
		want string
		err  error
	}{
		{wire.JobLaunchReq{}, wire.OnFailureAbort, nil},
		{wire.JobLaunchReq{KeepGoing: true}, wire.OnFailureContinue, nil},
		{wire.JobLaunchReq{OnFailure: "ABORT"}, wire.OnFailureAbort, nil},
		{wire.JobLaunchReq{OnFailure: "continue", KeepGoing: true}, wire.OnFailureContinue, nil},
		{wire.JobLaunchReq{OnFailure: "shrink"}, wire.OnFailureShrink, nil},
		{wire.JobLaunchReq{OnFailure: "shrink", KeepGoing: true}, "", wire.ErrInvalid},
		{wire.JobLaunchReq{OnFailure: "replace"}, wire.OnFailureReplace, nil},
		{wire.JobLaunchReq{OnFailure: "replace", KeepGoing: true}, "", wire.ErrInvalid},
		{wire.JobLaunchReq{OnFailure: "restart"}, "", wire.ErrInvalid},
	}
	for _, c := range cases {
		got, err := failurePolicy(&c.req)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%+v: %q, %v; want %q, %v", c.req, got, err, c.want, c.err)
		}
	}
}
