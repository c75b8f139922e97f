// Package pmix hosts a PMIx server (OpenPMIx's server library, through
// cgo) for the node daemon: Open MPI processes speak PMIx only, so a
// daemon that starts them registers their job and processes here, puts
// the variables of SetupFork into their environment, and answers the
// server's host callbacks (client connected/finalized, abort, fence,
// direct modex, ...) through a Handler.
//
// All cgo of dynrt is in this package. Files with the build tag pmix use
// libpmix (libpmix-dev, pkg-config pmix); without the tag the package
// has the same API, Available reports false and Start returns
// ErrUnavailable, so that the default build needs no C library.
//
// OpenPMIx allows one server per process, and cannot start it again once
// finalised: Start initialises it on first use and returns the same
// Server to every later caller; Finalize, at the end of the process,
// stops it. Jobs (namespaces) each carry their own Handler, so several
// daemons of one test process can share the server.
//
// Callbacks never block OpenPMIx's progress thread: every Handler method
// runs on a goroutine of its own and reports its result through the
// completion function it is given, exactly once.
package pmix

import (
	"errors"
	"fmt"
)

// RankWildcard is PMIx's rank of a whole namespace (PMIX_RANK_WILDCARD);
// RankUndef names no process (PMIX_RANK_UNDEF).
const (
	RankWildcard = ^uint32(0) - 1
	RankUndef    = ^uint32(0)
)

// Proc names a PMIx process: its namespace (the dynrt job) and rank.
type Proc struct {
	Nspace string
	Rank   uint32
}

func (p Proc) String() string {
	if p.Rank == RankWildcard {
		return p.Nspace + ":*"
	}
	return fmt.Sprintf("%s:%d", p.Nspace, p.Rank)
}

// ErrUnavailable is returned by every operation of a dynrt built without
// PMIx support.
var ErrUnavailable = errors.New("this dynrun was built without PMIx support (libpmix-dev): rebuild with `make` on a machine with libpmix-dev, or go build -tags pmix")

// Config configures the process's PMIx server.
type Config struct {
	// Dir is the server's own directory: its rendezvous files (the
	// socket clients connect to) go there, so that several daemons of
	// one host (virtual nodes) never share one. It must exist.
	Dir string
	// Nspace and Rank name the server itself (PMIX_SERVER_NSPACE/RANK).
	Nspace string
	Rank   uint32
}

// Job describes one namespace to the server: what its processes read at
// PMIx_Init (sizes, maps, local peers, ...).
type Job struct {
	Nspace string
	// Size is the number of processes of the job; Universe the
	// universe size (MPI_UNIVERSE_SIZE), at least Size.
	Size, Universe uint32
	// Nodes names the job's nodes; RankNode gives the index in Nodes of
	// every rank (len Size); Node is the index of this server's node,
	// -1 for a job none of whose processes run here (registered so that
	// local clients connected to it reach its processes' data).
	Nodes    []string
	RankNode []int
	Node     int
	// RankApp gives the application number of every rank (nil: all 0).
	RankApp []uint32
	// Tmpdir is a scratch directory for the job's processes
	// (PMIX_TMPDIR, PMIX_NSDIR).
	Tmpdir string
	// Spawned marks a job started by another job (PMIX_SPAWNED); Parent
	// names the process that spawned it (PMIX_PARENT_ID), if known.
	Spawned bool
	Parent  *Proc
	// Psets are the job's process sets at launch, by name, with their
	// member ranks: each process reads the names of its own as
	// PMIX_PSET_NAMES.
	Psets map[string][]uint32
	// Dynrt places the namespace in its dynrt job, for programs that
	// follow resource changes (nil: nothing is said).
	Dynrt *DynrtJob
}

// DynrtJob is the job-level information dynrt registers in a namespace
// (dynrt_pmix.h): the dynrt job (DYNRT_PMIX_JOB), the dynrt rank of PMIx
// rank 0 (DYNRT_PMIX_BASE), and for the namespace of the processes a
// resource change added to a running job, that change's delta set
// (DYNRT_PMIX_RC_DELTA), which they confirm.
type DynrtJob struct {
	Job   string
	Base  uint32
	Delta string
}

// LocalRanks returns the ranks of j on its server's node, in rank order.
func (j *Job) LocalRanks() []uint32 { return j.ranksOn(j.Node) }

func (j *Job) ranksOn(node int) []uint32 {
	var rs []uint32
	for r, n := range j.RankNode {
		if n == node {
			rs = append(rs, uint32(r))
		}
	}
	return rs
}

// Handler answers the host callbacks of one job's processes. Each method
// runs on its own goroutine and must call done exactly once (it may do
// so later, from any goroutine). Errors given to done reach the client
// as PMIx errors (a *StatusError keeps its status; others become
// PMIX_ERROR).
type Handler interface {
	// ClientConnected: p completed PMIx_Init.
	ClientConnected(p Proc, done func(error))
	// ClientFinalized: p called PMIx_Finalize.
	ClientFinalized(p Proc, done func(error))
	// Abort: p called PMIx_Abort(status, msg) for procs (nil: its
	// whole namespace).
	Abort(p Proc, status int, msg string, procs []Proc, done func(error))
	// Fence: the local processes of procs entered a fence; data is this
	// server's contribution (opaque). done gets the concatenation of
	// every participating server's contribution (collect or not: the
	// server library needs at least the local part back).
	Fence(procs []Proc, collect bool, data []byte, done func([]byte, error))
	// DirectModex: a local client wants the data of p, a process of
	// another node: done gets the blob that p's server returns from
	// Server.DirectModexRequest.
	DirectModex(p Proc, done func([]byte, error))
}

// Persistence is how long a published name is to live: the
// PMIX_PERSISTENCE a publish gave (PersistDefault: none). A persistence
// of another type or an unknown value fails the publish with
// PMIX_ERR_BAD_PARAM.
type Persistence int

const (
	PersistDefault   Persistence = iota // no PMIX_PERSISTENCE given
	PersistIndef                        // PMIX_PERSIST_INDEF: until unpublished
	PersistFirstRead                    // PMIX_PERSIST_FIRST_READ: until the first lookup that finds it
	PersistProc                         // PMIX_PERSIST_PROC: until the publishing process ends
	PersistApp                          // PMIX_PERSIST_APP: until the publisher's application ends
	PersistSession                      // PMIX_PERSIST_SESSION: until the session ends
)

// Publisher is the optional part of a Handler that serves PMIx_Publish,
// PMIx_Lookup and PMIx_Unpublish (MPI_Publish_name and friends); without
// it they fail with PMIX_ERR_NOT_SUPPORTED. Values are strings: port
// names (what MPI publishes) as they are; a value of another type (Open
// MPI 4.1 exchanges integers this way when it agrees on a communicator
// id with another job) is packed by libpmix behind a marker that no
// string starts with, and unpacked again for a lookup. Of the directives
// (keys in PMIx's own "pmix." namespace) only the persistence is passed on;
// range and timeout are not.
type Publisher interface {
	// Publish: p publishes data (key → value) to live as persist says.
	Publish(p Proc, data map[string]string, persist Persistence, done func(error))
	// Lookup: p asks for keys; with wait, the answer waits until they
	// are published. done gets the values found (CodeNotFound if none);
	// the answer names p as their publisher.
	Lookup(p Proc, keys []string, wait bool, done func(map[string]string, error))
	// Unpublish: p withdraws keys (nil: everything it published).
	Unpublish(p Proc, keys []string, done func(error))
}

// Querier is the optional part of a Handler that answers PMIx_Query_info
// (the keys libpmix cannot answer from what the job was registered
// with); without it queries fail with PMIX_ERR_NOT_SUPPORTED. done gets
// an answer per key it knows; an error (CodeNotFound when none was
// known, CodePartialSuccess when some) goes along with them. libpmix
// 4.2.2 does not say which client asks: the query goes to the job its
// PMIX_NSPACE or PMIX_PROCID qualifier names (p's rank RankUndef), else
// to the client that asked, found by requestor.c from its connection (p
// is that client), else to the only job registered with the server (p's
// rank RankUndef); several jobs and none of these: PMIX_ERR_NOT_SUPPORTED.
type Querier interface {
	Query(p Proc, queries []Query, done func([]QueryResult, error))
}

// Query is one query: keys and qualifiers (those with string values, by
// key: KeyPsetName for KeyQueryPsetMembership).
type Query struct {
	Keys       []string
	Qualifiers map[string]string
}

// QueryResult answers one key. Value is a uint64 (a PMIx size_t), uint32,
// string, bool, []string or []Proc (PMIx data arrays).
type QueryResult struct {
	Key   string
	Value any
}

// PMIx keys about process sets (pmix_common.h).
const (
	KeyQueryNumPsets       = "pmix.qry.psetnum" // answer: uint64, the number of sets
	KeyQueryPsetNames      = "pmix.qry.psets"   // answer: string, the names separated by commas
	KeyQueryPsetMembership = "pmix.qry.pmems"   // qualifier KeyPsetName; answer: []Proc
	KeyPsetName            = "pmix.pset.nm"     // a set's name
	KeyPsetNames           = "pmix.pset.nms"    // []string: the sets a process belongs to
)

// PMIx statuses for Handler errors (pmix_common.h).
const (
	CodeNoPermissions  = -23 // PMIX_ERR_NO_PERMISSIONS
	CodeTimeout        = -24 // PMIX_ERR_TIMEOUT
	CodeNotFound       = -46 // PMIX_ERR_NOT_FOUND
	CodeNotSupported   = -47 // PMIX_ERR_NOT_SUPPORTED
	CodePartialSuccess = -52 // PMIX_ERR_PARTIAL_SUCCESS
	CodeDuplicateKey   = -53 // PMIX_ERR_DUPLICATE_KEY
)

// StatusError is a PMIx status as a Go error.
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string { return e.Msg }
