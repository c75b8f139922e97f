package wire

// samples returns one fully populated value of every catalogue type, keyed
// by type name. TestSamplesComplete checks that every exported struct type
// of the catalogue files is here and that every field is set.
func samples() map[string]any {
	u32 := func(v uint32) *uint32 { return &v }
	yes := true
	rr := RankRanges{{0, 3}, {7, 7}, {9, 1000}}
	ref := PsetRef{Name: "mpi://app/lu/grid", Version: 3}
	pset := PsetInfo{
		Name: "mpi://app/lu/grid", Job: "dvm1.1", Version: 3, Epoch: 2, Active: true, Size: 997,
		Hints: map[string]string{"walltime": "60", "min": "4", "b": "x", "a": "y"}, Members: rr, Time: 1700000000123456789,
	}
	times := RCTimes{
		Requested: 1700000000000000001, Placed: 1700000000000000002, Defined: 1700000000000000003,
		JobData: 1700000000000000004, Announced: 1700000000000000005, Launched: 1700000000000000006,
		Started: 1700000000000000007, Accepted: 1700000000000000008, Confirmed: 1700000000000000009,
		Finalized: 1700000000000000010, Exited: 1700000000000000011, Aborted: 1700000000000000012,
		Enforced: 1700000000000000013,
	}
	pl := []Placement{{Node: "n0", Ranks: RankRanges{{0, 3}}}, {Node: "n1", Ranks: RankRanges{{4, 7}, {12, 12}}}}
	rc := RC{
		Delta: "mpi://rte/lu/rc/1", Job: "dvm1.1", Type: RCAdd, Status: RCPending,
		Bound: []string{"mpi://app/lu"}, Requester: ByTool, RequesterID: "dynrc pid 4242", N: 4,
		Ranks: RankRanges{{8, 11}}, Out: RankRanges{{2, 3}}, OutSet: "mpi://rte/lu/rc/3/out", Placement: pl, NewSet: &ref, Accepts: 1, Reason: "none", Times: times,
		Seq: 5, BoundRefs: []PsetRef{{Name: "mpi://app/lu", Version: 2}}, Settled: true,
		Ended: []ProcInfo{{Rank: 9, Node: "n1", State: ProcStateKilled, Signal: 15, Ended: 1700000000000000014}},
		Cause: &RCCause{Kind: CauseFailure, Ranks: RankRanges{{8, 11}}, Why: []string{"rank 8 on n1 was lost with its node (daemon gone)"}},
	}
	out := OutputLine{Job: "dvm1.1", Rank: 5, Stream: StreamStderr, Line: []byte("hello\x00\xffworld"), Time: 1700000000000000099}
	proc := ProcInfo{Rank: 2, Node: "n0", PID: 31337, State: ProcStateExited, Code: 3, Signal: 9, Started: 1, Ended: 2}
	job := JobInfo{
		ID: 7, Job: "dvm1.7", App: "lu", State: JobStateRunning, Argv: []string{"./lu", "-n", "64"}, Size: 8,
		NextRank: 12, Code: 1, Started: 3, Ended: 4, Delta: "mpi://rte/lu/rc/1", Placement: pl, Procs: []ProcInfo{proc},
		Reason: JobEndFailed, Msg: "job lu (dvm1.7): rank 2 on n0 exited with code 3", Failure: FailExit, OnFailure: OnFailureShrink,
	}
	slot := SlotUse{Slot: 9, Node: 1, Job: "dvm1.7", Rank: 2}
	node := NodeInfo{Name: "n0", Index: 1, Host: "h0", Slots: 8, Used: 6, PID: 100, Addr: "/run/d0.sock", State: NodeUp}
	procs := []ProcRanges{{Job: "dvm1.1", Ranks: rr}, {Job: "dvm1.2", Ranks: RankRanges{{0, 0}}}}
	kv := []KV{{Key: "addr", Value: []byte{1, 2, 3}}, {Key: "port", Value: []byte("5000")}}
	pkv := []ProcKV{{Job: "dvm1.1", Rank: 3, Data: kv}}
	outFlags := OutputFlags{Forward: true, Tag: true, Timestamp: true, Merge: true, Dir: "/tmp/out"}
	started := ProcStarted{Job: "dvm1.1", Rank: 4, PID: 999, Node: "n1", Time: 5}
	push := PsetPush{Seq: 17, Job: "dvm1.1", Defined: []PsetInfo{pset}, Deleted: []string{"mpi://app/lu/old"}, Keep: 16}
	jobData := JobData{Gen: 5, ID: 7, Job: "dvm1.7", App: "lu", Size: 8, NextRank: 12, Placement: pl, Gone: true, Psets: &push,
		PMIx: []PMIxSpace{{Nspace: "dvm1.7.rc3", Ranks: RankRanges{{8, 11}}, Delta: "mpi://rte/lu/rc/3"}}, Delta: true, Base: 4,
		Pending: "mpi://rte/lu/rc/4", Adding: RankRanges{{12, 12}}, Leaving: RankRanges{{3, 3}}}
	block := PMIBlock{Ranks: RankRanges{{0, 1}}, Argv: []string{"./master", "-v"}, Wdir: "/w/m", Env: []string{"OMPI_PARENT_PORT=123.0:456"}}
	pmiJob := PMIJob{Mode: PMIPort, KVS: "kvs_dvm1.7", Universe: 16, Parent: "kvs_dvm1.6", ParentJob: "dvm1.6", ParentRank: 2, Preput: kv,
		Blocks: []PMIBlock{block, {Ranks: RankRanges{{2, 7}}, Argv: []string{"./worker"}}}, KeepGoing: true}
	spawnApp := PMISpawnApp{Argv: []string{"./worker", "x"}, N: 6, Info: []KV{{Key: "wdir", Value: []byte("/w")}}, Env: []string{"OMPI_PARENT_PORT=123.0:456"}}
	return map[string]any{
		"ProcID":     &ProcID{Job: "dvm1.1", Rank: 42},
		"ProcRanges": &procs[0],
		"Placement":  &pl[1],
		"KV":         &kv[0],
		"ProcKV":     &pkv[0],
		"Hello":      &Hello{Min: 1, Max: 2, Role: RoleTool, Name: "dynrc", Token: "s3cret", PID: 4242},
		"HelloReply": &HelloReply{V: 1, Name: "master", PeerUID: 1000, Role: RoleMaster, PID: 77},
		"Envelope": &Envelope{V: 1, ID: 12345678901, Kind: KindPsetOp, Body: []byte{0x81, 0xa1, 0x6e, 0x01},
			Err: &Error{Code: CodeBusy, Msg: "rc in flight"}},
		"Error": &Error{Code: CodeNotFound, Msg: "no such set"},

		"SessionInitReq": &SessionInitReq{Job: "dvm1.1", Rank: 3, PID: 1234, Latest: true},
		"SessionInfo": &SessionInfo{Job: "dvm1.1", App: "lu", Rank: 3, UID: ProcUID(1, 3), Size: 8, Node: "n0",
			LocalRank: 3, LocalPeers: RankRanges{{0, 3}}, DVM: "ab12cd", Delta: "mpi://rte/lu/rc/1"},
		"SessionFinReq": &SessionFinReq{Job: "dvm1.1", Rank: 3},
		"AbortReq":      &AbortReq{Job: "dvm1.1", Rank: 3, Status: 2, Msg: "bad input", Procs: procs},
		"GroupReq":      &GroupReq{ID: "g1", Job: "dvm1.1", Rank: 3, Procs: procs, TimeoutMS: 5000},
		"GroupReply":    &GroupReply{CID: 1<<40 | 5},

		"PsetRef":  &ref,
		"PsetInfo": &pset,
		// Every field set, split fields included (see TestPsetOpCompat
		// for the encodings of the requests older clients send).
		"PsetOpReq": &PsetOpReq{Job: "dvm1.1", Op: OpUnion, P1: "mpi://app/lu", P2: "mpi://rte/lu/rc/1",
			Target: "mpi://app/lu/grid", Active: &yes, Hints: map[string]string{"k": "v", "a": ""}, Rank: 2,
			Mode: SplitRanks, K: 2, Lists: []RankRanges{{{0, 3}}, {{4, 4}, {9, 1000}}}, Names: []string{"mpi://app/lu/a", "mpi://app/lu/b"}},
		"PsetOpReply": &PsetOpReply{Name: "mpi://app/lu/grid", Version: 4, Size: 12, Members: rr,
			Updated: []PsetRef{ref, {Name: "mpi://app/lu", Version: 1}}, Parts: []PsetInfo{pset}, Nodes: []string{"n0"}},
		"PsetGetReq":    &PsetGetReq{Job: "dvm1.1", Name: "mpi://WORLD", Version: u32(0), Members: true},
		"PsetListReq":   &PsetListReq{Job: "dvm1.1", Prefix: "mpi://app/", Members: true, Deleted: true},
		"PsetQueryReq":  &PsetQueryReq{Job: "dvm1.1", Refs: []PsetRef{ref}, Rank: u32(7), Members: true},
		"PsetList":      &PsetList{Sets: []PsetInfo{pset, {Name: "mpi://SELF", Version: 0, Size: 1}}},
		"PsetDeleteReq": &PsetDeleteReq{Job: "dvm1.1", Name: "mpi://app/lu/grid"},
		"PsetPush":      &push,

		"RCTimes": &times,
		"RC":      &rc,
		"RCCause": rc.Cause,
		"RCRequest": &RCRequest{Job: "dvm1.1", Type: RCSub, N: 2, Ranks: RankRanges{{6, 7}}, Bound: []string{"mpi://app/lu"},
			Requester: ByApp, RequesterID: "rank 0", Hints: map[string]string{"z": "1", "y": "2"}, Wait: true, TimeoutMS: 1000,
			Queue: true, GraceMS: 2000, ConfirmMS: 30000},
		"RCQueryReq":   &RCQueryReq{Job: "dvm1.1", Delta: "mpi://rte/lu/rc/1", Rank: u32(9), Bound: "mpi://SELF", Need: true},
		"RCQueryReply": &RCQueryReply{RC: &rc, Incl: true},
		"RCListReq":    &RCListReq{Job: "dvm1.1", All: true},
		"RCList":       &RCList{RCs: []RC{rc}},
		"RCCancelReq":  &RCCancelReq{Delta: "mpi://rte/lu/rc/1", Reason: "operator", Job: "k3x9m2ab.3", Rank: 2},
		"RCAcceptReq": &RCAcceptReq{Delta: "mpi://rte/lu/rc/1", Job: "dvm1.1", Rank: 1, Set: ref, Block: true, TimeoutMS: 3000,
			Bound: "mpi://app/lu", Call: 2, Root: u32(1), Alone: true},
		"RCConfirmReq":  &RCConfirmReq{Delta: "mpi://rte/lu/rc/1", Job: "dvm1.1", Rank: 8, Set: ref, TimeoutMS: 2500},
		"RCAcceptReply": &RCAcceptReply{Status: RCFinalized, Terminate: true, Set: ref},

		"KVPutReq":     &KVPutReq{Job: "dvm1.1", Rank: 1, Key: "ep", Value: []byte("tcp://h0:4000")},
		"KVCommitReq":  &KVCommitReq{Job: "dvm1.1", Rank: 1, Data: kv},
		"KVGetReq":     &KVGetReq{Job: "dvm1.1", Rank: 2, Key: "ep", Wait: true, TimeoutMS: 100, Refresh: true},
		"KVGetReply":   &KVGetReply{Value: []byte("tcp://h1:4000")},
		"KVFetchReq":   &KVFetchReq{Procs: procs, Key: "ep", Wait: true, TimeoutMS: 100},
		"KVFetchReply": &KVFetchReply{Data: pkv},
		"FenceReq": &FenceReq{ID: "f1", Procs: procs, Collect: true, TimeoutMS: 2000, Data: pkv, Local: RankRanges{{0, 3}},
			Job: "dvm1.1", Stored: true, Parts: []FencePart{{Node: "n2", Local: RankRanges{{4, 7}}, Data: pkv, Collect: true, Stored: true, TimeoutMS: 1500, Extra: true}}},
		"FenceReply":     &FenceReply{Data: pkv, Stored: true, Parts: []FencePartReply{{Err: &Error{Code: CodeAborted, Msg: "rank 3 ended"}, Again: true, Data: pkv, Stored: true}}},
		"FencePart":      &FencePart{Node: "n2", Local: RankRanges{{4, 7}}, Data: pkv, Collect: true, Stored: true, TimeoutMS: 1500, Extra: true},
		"FencePartReply": &FencePartReply{Err: &Error{Code: CodeAborted, Msg: "rank 3 ended"}, Again: true, Data: pkv, Stored: true},
		"FenceData":      &FenceData{Inst: 12, Job: "j1", Procs: []ProcRanges{{Job: "j1", Ranks: Span(0, 3)}}, Data: pkv},

		"PublishReq":   &PublishReq{Job: "dvm1.1", Rank: 1, Range: RangeDVM, Data: kv, Persist: PersistFirstRead},
		"LookupReq":    &LookupReq{Job: "dvm1.1", Rank: 8, Range: RangeJob, Keys: []string{"a", "b"}, Wait: true, TimeoutMS: 10},
		"LookupReply":  &LookupReply{Data: kv},
		"UnpublishReq": &UnpublishReq{Job: "dvm1.1", Rank: 1, Range: RangeDVM, Keys: []string{"a"}},

		"Event": &Event{Seq: 99, Time: 1700000000000000000, Kind: EvRCState, Job: "dvm1.1", Ranks: rr, Node: "n0",
			State: "running", Code: 1, Signal: 15, Pset: &pset, RC: &rc, Output: &out, Source: &ProcID{Job: "dvm1.1", Rank: 1},
			Msg: "hello", Data: map[string]string{"b": "2", "a": "1", "c": "3"}},
		"EventSubReq":    &EventSubReq{Kinds: []string{"rc.", "job."}, Job: "dvm1.1", Since: 12},
		"EventSubReply":  &EventSubReply{ID: 3, Seq: 120},
		"EventUnsubReq":  &EventUnsubReq{ID: 3},
		"EventNotifyReq": &EventNotifyReq{Job: "dvm1.1", Rank: 2, Msg: "phase 2", Data: map[string]string{"iter": "10"}},

		"OutputFlags": &outFlags,
		"JobLaunchReq": &JobLaunchReq{Argv: []string{"./lu", "-n", "64"}, N: 8, MapBy: MapByNode, Oversubscribe: true,
			Name: "lu", Env: []string{"OMP_NUM_THREADS=1", "A=b"}, Wdir: "/home/u", KeepGoing: true, TimeoutMS: 60000, Output: outFlags, PMI: PMIPort, PMINeed: PMINeedPMIx, PMIWhy: "links libmpi.so.40 (Open MPI)",
			Stdin: true, Universe: UniverseSlots, OnFailure: OnFailureShrink},
		"JobLaunchReply": &JobLaunchReply{ID: 7, Job: "dvm1.7", App: "lu", Placement: pl},
		"ProcInfo":       &proc,
		"JobInfo":        &job,
		"JobStateReq":    &JobStateReq{Job: "dvm1.7", Procs: true},
		"JobListReq":     &JobListReq{All: true},
		"JobList":        &JobList{Jobs: []JobInfo{job}},
		"JobKillReq":     &JobKillReq{Job: "dvm1.7", Signal: 2, GraceMS: 500},
		"JobWaitReq":     &JobWaitReq{Job: "dvm1.7", TimeoutMS: 9000},
		"JobStdin":       &JobStdin{Job: "dvm1.7", Rank: 3, Data: []byte("line 1\n\x00"), EOF: true},

		"NodeRegister":      &NodeRegister{Name: "n1", Host: "h1", Slots: 4, PID: 55, Addr: "/run/n1.sock", PMIx: true, Relay: "unix:/run/n1.sock", RelayID: 77},
		"NodeRegisterReply": &NodeRegisterReply{Index: 1, DVM: "ab12cd", HeartbeatMS: 1000, DeadMS: 4000, Net: "198.18.1.0/24"},
		"NodeInfo":          &node,
		"JobData":           &jobData,
		"LaunchReq": &LaunchReq{Job: "dvm1.7", App: "lu", ID: 7, Ranks: RankRanges{{8, 11}}, Argv: []string{"./lu"},
			Env: []string{"X=1"}, Wdir: "/w", Output: outFlags, Delta: "mpi://rte/lu/rc/1", Stdin: true,
			Data: &JobData{Gen: 6, ID: 7, Job: "dvm1.7", App: "lu", Size: 12, NextRank: 12, Placement: pl}, Psets: &push, PMI: &pmiJob, Mine: true},
		"LaunchReply": &LaunchReply{Started: []ProcStarted{started}},
		"ProcStarted": &started,
		"ProcExited": &ProcExited{Job: "dvm1.1", Rank: 4, PID: 999, Node: "n1", Code: 137, Signal: 9, Forced: true,
			Err: "exec: no such file", Time: 6},
		"OutputLine":  &out,
		"KillReq":     &KillReq{Job: "dvm1.7", Ranks: RankRanges{{10, 11}}, Signal: 15, GraceMS: 2000, Only: true},
		"KillReply":   &KillReply{N: 2},
		"NodeStopReq": &NodeStopReq{GraceMS: 100},
		"NodeRelay": &NodeRelay{Seq: 9, To: 78, Kind: KindRCPush, Body: Raw{0x81, 0xa1, 0x6a, 0xa2, 0x6a, 0x31}, Radix: 2, WaitMS: 5000,
			Below: []RelayHop{{Node: "n2", Addr: "unix:/run/n2.sock", ID: 79, Prev: 40}, {Node: "n3", Addr: "tcp:10.0.0.3:4100", ID: 80}},
			Job:   "dvm1.1", From: "unix:/run/n1.sock", Prev: 41},
		"TreeState":      &TreeState{Radix: 16, Relays: 40, Resends: 2, Fences: 3, Up: 12, UpParts: 96, Events: 7},
		"NodeEvent":      &NodeEvent{Prev: 41, Ev: Raw{0x81, 0xa3, 0x73, 0x65, 0x71, 0x2a}},
		"RelayHop":       &RelayHop{Node: "n2", Addr: "unix:/run/n2.sock", ID: 79, Prev: 40},
		"RelayFailure":   &RelayFailure{Node: "n3", Unreached: true, Err: &Error{Code: CodeClosed, Msg: "connection closed"}},
		"NodeRelayReply": &NodeRelayReply{Failed: []RelayFailure{{Node: "n3", Unreached: true}, {Node: "n2", Err: &Error{Code: CodeInvalid, Msg: "no such job"}}}, Started: []ProcStarted{started}},
		"Ping":           &Ping{Seq: 1, Time: 2},

		"PMIJob":        &pmiJob,
		"PMIxSpace":     &jobData.PMIx[0],
		"PMIBlock":      &block,
		"PMISpawnApp":   &spawnApp,
		"PMISpawnReq":   &PMISpawnReq{Job: "dvm1.6", Rank: 2, Apps: []PMISpawnApp{spawnApp, {Argv: []string{"./io"}, N: 1}}, Preput: kv, MapBy: MapByNode},
		"PMISpawnReply": &PMISpawnReply{Job: "dvm1.7", KVS: "kvs_dvm1.7", Codes: []int{0, 0, 127}},
		"PMIReport":     &PMIReport{Job: "dvm1.7", Rank: 3, What: PMIReportUnfinished, Msg: "rank 3 left PMI without finalize"},
		"PMIDead":       &PMIDead{Job: "dvm1.7", Ranks: []uint32{3, 1}},
		"PMIJobCtl":     &PMIJobCtl{Job: "dvm1.7", Rank: 2, Procs: []ProcRanges{{Job: "dvm1.7", Ranks: RankRanges{{1, 1}}}}, Signal: 10},

		"DVMStateReq": &DVMStateReq{Ended: true},
		"DVMState": &DVMState{ID: "ab12cd", PID: 77, Started: 1, Uptime: 2, Version: "v0.1.0", Nodes: []NodeInfo{node},
			Jobs: []JobInfo{job}, RCs: []RC{rc}, Slots: []SlotUse{slot, {Slot: -1, Node: 0, Job: "dvm1.2", Rank: 0}}, Launcher: "ssh", Tree: &TreeState{Radix: 16, Relays: 40, Resends: 2, Fences: 3}, LauncherInfo: "slurm: job 12 (chosen because SLURM_JOB_ID is set)",
			NodeLog: []Event{{Seq: 9, Time: 3, Kind: EvNodeAdded, Node: "h3", Msg: "node h3 joined the DVM: 8 slots on host h3"}}},
		"SlotUse":        &slot,
		"DVMStopReq":     &DVMStopReq{GraceMS: 100},
		"DVMGrowReq":     &DVMGrowReq{Hosts: []GrowHost{{Name: "h3", Slots: 8}}, Nodes: 2, Slots: 4, TimeoutMS: 5000},
		"GrowHost":       &GrowHost{Name: "h3", Slots: 8},
		"DVMGrowReply":   &DVMGrowReply{Nodes: []NodeInfo{node}},
		"DVMShrinkReq":   &DVMShrinkReq{Node: "h3", Drain: true, TimeoutMS: 3000},
		"DVMShrinkReply": &DVMShrinkReply{Node: node, Drained: []RC{rc}},
	}
}
