package wire

import (
	"slices"
	"strings"
)

// KindInfo describes one message kind of the catalogue.
type KindInfo struct {
	Kind string // envelope kind
	// Dir says who sends it to whom: routes separated by ", ", each a
	// chain of roles joined by "→" (a→b→c: a sends it to b, which relays
	// it to c), where "a/b" stands for either role; a remark in
	// parentheses is not part of the route. "either way" means any side of
	// any connection. Sends reads it; the master's and the daemon's tests
	// check it against the kinds they serve.
	Dir   string
	Event bool // pushed with id 0; there is no reply
	Req   any  // pointer to a zero value of the request (or event) body; nil = no body
	Reply any  // pointer to a zero value of the reply body; nil = empty reply
}

// Catalogue lists every message kind with its body types, in the order of
// docs/wire.md. It returns fresh values on each call; tools use it to
// decode frames generically, tests to check coverage.
func Catalogue() []KindInfo {
	return []KindInfo{
		{Kind: KindHello, Dir: "any dialer→acceptor (first frame)", Req: &Hello{}, Reply: &HelloReply{}},
		{Kind: KindPing, Dir: "either way", Req: &Ping{}, Reply: &Ping{}},

		{Kind: KindSessionInit, Dir: "client→daemon", Req: &SessionInitReq{}, Reply: &SessionInfo{}},
		{Kind: KindSessionFinalize, Dir: "client→daemon", Req: &SessionFinReq{}},
		{Kind: KindSessionAbort, Dir: "client→daemon→master", Req: &AbortReq{}},
		{Kind: KindGroupConstruct, Dir: "client→daemon→master", Req: &GroupReq{}, Reply: &GroupReply{}},
		{Kind: KindGroupDestruct, Dir: "client→daemon→master", Req: &GroupReq{}},

		{Kind: KindPsetOp, Dir: "client→daemon→master, tool→master", Req: &PsetOpReq{}, Reply: &PsetOpReply{}},
		{Kind: KindPsetGet, Dir: "client→daemon, client→daemon→master (another job, not held by the daemon), tool→master", Req: &PsetGetReq{}, Reply: &PsetInfo{}},
		{Kind: KindPsetList, Dir: "client→daemon, client→daemon→master (another job, not held by the daemon), tool→master", Req: &PsetListReq{}, Reply: &PsetList{}},
		{Kind: KindPsetQuery, Dir: "client→daemon, client→daemon→master (another job, not held by the daemon), tool→master", Req: &PsetQueryReq{}, Reply: &PsetList{}},
		{Kind: KindPsetDelete, Dir: "client→daemon→master, tool→master", Req: &PsetDeleteReq{}},
		{Kind: KindPsetPush, Dir: "master→daemon", Req: &PsetPush{}},

		{Kind: KindRCRequest, Dir: "client→daemon→master, tool→master", Req: &RCRequest{}, Reply: &RC{}},
		{Kind: KindRCQuery, Dir: "client→daemon, tool/daemon→master", Req: &RCQueryReq{}, Reply: &RCQueryReply{}},
		{Kind: KindRCList, Dir: "tool→master", Req: &RCListReq{}, Reply: &RCList{}},
		{Kind: KindRCCancel, Dir: "tool→master, client→daemon→master", Req: &RCCancelReq{}, Reply: &RC{}},
		{Kind: KindRCAccept, Dir: "client→daemon→master", Req: &RCAcceptReq{}, Reply: &RCAcceptReply{}},
		{Kind: KindRCConfirm, Dir: "client→daemon→master", Req: &RCConfirmReq{}, Reply: &RCAcceptReply{}},
		{Kind: KindRCPush, Dir: "master→daemon", Req: &RC{}},

		{Kind: KindKVPut, Dir: "client→daemon", Req: &KVPutReq{}},
		{Kind: KindKVCommit, Dir: "client→daemon", Req: &KVCommitReq{}},
		{Kind: KindKVGet, Dir: "client→daemon", Req: &KVGetReq{}, Reply: &KVGetReply{}},
		{Kind: KindKVFetch, Dir: "daemon→master/daemon", Req: &KVFetchReq{}, Reply: &KVFetchReply{}},
		{Kind: KindFence, Dir: "client→daemon→master", Req: &FenceReq{}, Reply: &FenceReply{}},
		{Kind: KindFenced, Dir: "master→daemon", Req: &FenceData{}},

		{Kind: KindPublish, Dir: "client→daemon→master", Req: &PublishReq{}},
		{Kind: KindLookup, Dir: "client→daemon→master", Req: &LookupReq{}, Reply: &LookupReply{}},
		{Kind: KindUnpublish, Dir: "client→daemon→master", Req: &UnpublishReq{}},

		{Kind: KindEvent, Dir: "master→subscriber (daemon relays to clients)", Event: true, Req: &Event{}},
		{Kind: KindEventSub, Dir: "client→daemon→master, tool→master", Req: &EventSubReq{}, Reply: &EventSubReply{}},
		{Kind: KindEventUnsub, Dir: "client→daemon→master, tool→master", Req: &EventUnsubReq{}},
		{Kind: KindEventNotify, Dir: "client→daemon→master", Req: &EventNotifyReq{}},
		{Kind: KindNodeEvent, Dir: "master→daemon (an event for its clients; also down the tree as a relay of event)", Event: true, Req: &NodeEvent{}},

		{Kind: KindJobLaunch, Dir: "tool→master", Req: &JobLaunchReq{}, Reply: &JobLaunchReply{}},
		{Kind: KindJobState, Dir: "tool→master", Req: &JobStateReq{}, Reply: &JobInfo{}},
		{Kind: KindJobList, Dir: "tool→master", Req: &JobListReq{}, Reply: &JobList{}},
		{Kind: KindJobKill, Dir: "tool→master", Req: &JobKillReq{}},
		{Kind: KindJobWait, Dir: "tool→master", Req: &JobWaitReq{}, Reply: &JobInfo{}},
		{Kind: KindJobStdin, Dir: "tool→master→daemon", Req: &JobStdin{}},

		{Kind: KindNodeRegister, Dir: "daemon→master", Req: &NodeRegister{}, Reply: &NodeRegisterReply{}},
		{Kind: KindNodeJobData, Dir: "master→daemon", Req: &JobData{}},
		{Kind: KindNodeLaunch, Dir: "master→daemon", Req: &LaunchReq{}, Reply: &LaunchReply{}},
		{Kind: KindNodeKill, Dir: "master→daemon", Req: &KillReq{}, Reply: &KillReply{}},
		{Kind: KindNodeStop, Dir: "master→daemon", Req: &NodeStopReq{}},
		{Kind: KindNodeRelay, Dir: "master→daemon, daemon→daemon", Req: &NodeRelay{}, Reply: &NodeRelayReply{}},
		{Kind: KindProcStarted, Dir: "daemon→master", Event: true, Req: &ProcStarted{}},
		{Kind: KindProcExited, Dir: "daemon→master", Event: true, Req: &ProcExited{}},
		{Kind: KindProcOutput, Dir: "daemon→master, master→launcher", Event: true, Req: &OutputLine{}},

		{Kind: KindPMISpawn, Dir: "daemon→master", Req: &PMISpawnReq{}, Reply: &PMISpawnReply{}},
		{Kind: KindPMIReport, Dir: "daemon→master", Req: &PMIReport{}},
		{Kind: KindPMIDead, Dir: "master→daemon", Req: &PMIDead{}},
		{Kind: KindPMIJobCtl, Dir: "daemon→master", Req: &PMIJobCtl{}},

		{Kind: KindDVMState, Dir: "tool→master", Req: &DVMStateReq{}, Reply: &DVMState{}},
		{Kind: KindDVMStop, Dir: "tool→master", Req: &DVMStopReq{}},
		{Kind: KindDVMGrow, Dir: "tool→master", Req: &DVMGrowReq{}, Reply: &DVMGrowReply{}},
		{Kind: KindDVMShrink, Dir: "tool→master", Req: &DVMShrinkReq{}, Reply: &DVMShrinkReply{}},
	}
}

// LookupKind returns the catalogue entry of kind.
func LookupKind(kind string) (KindInfo, bool) {
	for _, k := range Catalogue() {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// Sends reports whether Dir lets role from send the kind to role to, on
// one hop of a route (see Dir).
func (k KindInfo) Sends(from, to string) bool {
	for _, route := range strings.Split(k.Dir, ", ") {
		if route == "either way" {
			return true
		}
		if i := strings.Index(route, " ("); i >= 0 {
			route = route[:i]
		}
		hops := strings.Split(route, "→")
		for i := 0; i+1 < len(hops); i++ {
			if slices.Contains(strings.Split(hops[i], "/"), from) && slices.Contains(strings.Split(hops[i+1], "/"), to) {
				return true
			}
		}
	}
	return false
}
