package wire

import (
	"fmt"
	"strconv"
)

// Limits bound the sizes a request may carry. A receiver checks them before
// it acts on a request (it never trusts the sender), and the tools check
// them on their command line too, to fail early with a usage message. A
// request over a limit gets an ErrLimit error that names the limit.
// docs/limits.md lists them with their defaults.
type Limits struct {
	ProcsPerJob    int // processes one job may have (a launch, or a job after an ADD)
	ProcsPerChange int // processes one launch, ADD, SUB or PMI spawn starts or removes
	Nodes          int // nodes of a DVM
	NameBytes      int // bytes of a name: application, set, key, service, hint
	ArgvEnvBytes   int // bytes of a program's argv plus environment, each string with its NUL
	ListItems      int // entries of a list in a request: ranges, keys, bound sets, hints, spawn apps
	ValueBytes     int // bytes of one value put or published (KV, publish, hint values)
	// Retained history of a running job (not request sizes, but bounds on
	// what the master keeps as changes go by).
	HistoryChanges  int // settled resource-change records kept per job (their delta sets and keys go with them)
	HistoryVersions int // versions kept per process set (master and daemons)
}

// Default limits (docs/limits.md).
const (
	DefaultProcsPerJob     = 1 << 16
	DefaultProcsPerChange  = 1 << 16
	DefaultNodes           = 4096
	DefaultNameBytes       = 1024
	DefaultArgvEnvBytes    = 2 << 20 // Linux's ARG_MAX with the usual 8 MiB stack
	DefaultListItems       = 1 << 16
	DefaultValueBytes      = 1 << 20
	DefaultHistoryChanges  = 64
	DefaultHistoryVersions = 16
)

// DefaultLimits returns the limits used when none are configured.
func DefaultLimits() Limits {
	return Limits{
		ProcsPerJob: DefaultProcsPerJob, ProcsPerChange: DefaultProcsPerChange, Nodes: DefaultNodes,
		NameBytes: DefaultNameBytes, ArgvEnvBytes: DefaultArgvEnvBytes, ListItems: DefaultListItems,
		ValueBytes: DefaultValueBytes, HistoryChanges: DefaultHistoryChanges, HistoryVersions: DefaultHistoryVersions,
	}
}

// limitField describes one limit: its name in messages and its variable.
type limitField struct {
	name string // as in messages and docs/limits.md
	env  string // environment variable that overrides the default
	ptr  func(*Limits) *int
}

var limitFields = []limitField{
	{"procs-per-job", "DYNRT_LIMIT_PROCS_PER_JOB", func(l *Limits) *int { return &l.ProcsPerJob }},
	{"procs-per-change", "DYNRT_LIMIT_PROCS_PER_CHANGE", func(l *Limits) *int { return &l.ProcsPerChange }},
	{"nodes", "DYNRT_LIMIT_NODES", func(l *Limits) *int { return &l.Nodes }},
	{"name-bytes", "DYNRT_LIMIT_NAME_BYTES", func(l *Limits) *int { return &l.NameBytes }},
	{"argv-env-bytes", "DYNRT_LIMIT_ARGV_ENV_BYTES", func(l *Limits) *int { return &l.ArgvEnvBytes }},
	{"list-items", "DYNRT_LIMIT_LIST_ITEMS", func(l *Limits) *int { return &l.ListItems }},
	{"value-bytes", "DYNRT_LIMIT_VALUE_BYTES", func(l *Limits) *int { return &l.ValueBytes }},
	{"history-changes", "DYNRT_LIMIT_HISTORY_CHANGES", func(l *Limits) *int { return &l.HistoryChanges }},
	{"history-versions", "DYNRT_LIMIT_HISTORY_VERSIONS", func(l *Limits) *int { return &l.HistoryVersions }},
}

// maxProcs is what a process count can be on the wire (ranks are uint32).
const maxProcs = 1<<32 - 1

// LimitsFromEnv returns the default limits with the DYNRT_LIMIT_* variables
// of getenv applied (docs/limits.md). A value that is not a positive
// integer is an ErrInvalid error naming the variable.
func LimitsFromEnv(getenv func(string) string) (Limits, error) {
	l := DefaultLimits()
	for _, f := range limitFields {
		s := getenv(f.env)
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || n > maxProcs {
			return l, Errorf(ErrInvalid, "%s=%q: want a whole number from 1 to %d", f.env, s, int64(maxProcs))
		}
		*f.ptr(&l) = int(n)
	}
	return l, nil
}

// Or returns l with its unset (<= 0) fields taken from d.
func (l Limits) Or(d Limits) Limits {
	for _, f := range limitFields {
		if p := f.ptr(&l); *p <= 0 {
			*p = *f.ptr(&d)
		}
	}
	return l
}

// Normalize fills the unset fields of l with the defaults.
func (l Limits) Normalize() Limits { return l.Or(DefaultLimits()) }

// Exceeded is the error for a request over a limit: it names the limit,
// its value and where to read about it.
func Exceeded(what string, got int, limit string, max int) error {
	env := ""
	for _, f := range limitFields {
		if f.name == limit {
			env = f.env
		}
	}
	return Errorf(ErrLimit, "%s: %d exceeds the limit %s of %d (docs/limits.md; %s raises it)", what, got, limit, max, env)
}

// Procs checks a process count: n processes started or removed at once by
// what (e.g. "job.launch: n"), within procs-per-change and, when job is
// set (a launch: the count is also the job's size), procs-per-job.
func (l Limits) Procs(what string, n int, job bool) error {
	l = l.Normalize()
	if job {
		if err := l.JobProcs(what, n); err != nil {
			return err
		}
	}
	if n > l.ProcsPerChange {
		return Exceeded(what+" processes", n, "procs-per-change", l.ProcsPerChange)
	}
	return nil
}

// JobProcs checks the size a job would have, n processes, against
// procs-per-job.
func (l Limits) JobProcs(what string, n int) error {
	if l = l.Normalize(); n > l.ProcsPerJob {
		return Exceeded(what+" processes", n, "procs-per-job", l.ProcsPerJob)
	}
	return nil
}

// Check checks the sizes carried by a request body (a pointer to one of
// the request types; others pass). kind names the request in errors.
func (l Limits) Check(kind string, body any) error {
	l = l.Normalize()
	c := checker{l: l, kind: kind}
	switch b := body.(type) {
	case *JobLaunchReq:
		c.err = l.Procs(kind+": n", int(b.N), true)
		c.name("name", b.Name)
		c.argv(b.Argv, b.Env)
	case *RCRequest:
		c.err = l.Procs(kind+": n", int(b.N), false)
		if c.err == nil {
			c.err = l.Procs(kind+": ranks", b.Ranks.Count(), false)
		}
		c.list("r", len(b.Ranks))
		c.names("b", b.Bound)
		c.hints(b.Hints)
		c.name("byid", b.RequesterID)
	case *PMISpawnReq:
		c.list("apps", len(b.Apps))
		total := 0
		for _, a := range b.Apps {
			total += int(a.N)
			c.argv(a.Argv, a.Env)
			c.kvs("info", a.Info)
		}
		if c.err == nil {
			c.err = l.Procs(kind+": n", total, true)
		}
		c.kvs("pp", b.Preput)
	case *KVPutReq:
		c.name("k", b.Key)
		c.value("v", len(b.Value))
	case *KVCommitReq:
		c.kvs("d", b.Data)
	case *KVGetReq:
		c.name("k", b.Key)
	case *FenceReq:
		c.name("id", b.ID)
		c.list("p", len(b.Procs))
	case *EventNotifyReq:
		c.value("msg", len(b.Msg))
		c.hints(b.Data)
	case *EventSubReq:
		c.names("k", b.Kinds)
	case *PublishReq:
		c.kvs("d", b.Data)
	case *LookupReq:
		c.names("k", b.Keys)
	case *UnpublishReq:
		c.names("k", b.Keys)
	case *DVMGrowReq:
		c.list("h", len(b.Hosts))
		for _, h := range b.Hosts {
			c.name("h", h.Name)
		}
		c.fail("field n", int(b.Nodes), "nodes", l.Nodes)
		c.fail("field h entries", len(b.Hosts), "nodes", l.Nodes)
	case *DVMShrinkReq:
		c.name("n", b.Node)
	case *PsetOpReq:
		c.name("p1", b.P1)
		c.name("p2", b.P2)
		c.name("t", b.Target)
		c.hints(b.Hints)
		// A split stores one set per part: the parts, their lists and
		// names are bounded like any list, and the ranks they name (a
		// partition of one set) like the processes of one job.
		c.fail("field k", int(b.K), "list-items", l.ListItems)
		c.list("rl", len(b.Lists))
		ranges, ranks := 0, 0
		for _, rl := range b.Lists {
			ranges += len(rl)
			ranks += rl.Count()
		}
		c.fail("field rl ranges", ranges, "list-items", l.ListItems)
		c.fail("field rl ranks", ranks, "procs-per-job", l.ProcsPerJob)
		c.names("ns", b.Names)
	}
	return c.err
}

// checker keeps the first limit a request breaks.
type checker struct {
	l    Limits
	kind string
	err  error
}

func (c *checker) fail(what string, got int, limit string, max int) {
	if c.err == nil && got > max {
		c.err = Exceeded(fmt.Sprintf("%s: %s", c.kind, what), got, limit, max)
	}
}

func (c *checker) name(field, s string) {
	c.fail("field "+field+" bytes", len(s), "name-bytes", c.l.NameBytes)
}

func (c *checker) names(field string, ss []string) {
	c.list(field, len(ss))
	for _, s := range ss {
		c.name(field, s)
	}
}

func (c *checker) list(field string, n int) {
	c.fail("field "+field+" entries", n, "list-items", c.l.ListItems)
}

func (c *checker) value(field string, n int) {
	c.fail("field "+field+" value bytes", n, "value-bytes", c.l.ValueBytes)
}

func (c *checker) kvs(field string, kvs []KV) {
	c.list(field, len(kvs))
	for _, kv := range kvs {
		c.name(field+" key", kv.Key)
		c.value(field, len(kv.Value))
	}
}

// hints checks a string map (set hints, event data).
func (c *checker) hints(h map[string]string) {
	c.list("map", len(h))
	for k, v := range h {
		c.name("map key", k)
		c.value("map", len(v))
	}
}

func (c *checker) argv(argv, env []string) {
	n := 0
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	c.fail("argv and env bytes", n, "argv-env-bytes", c.l.ArgvEnvBytes)
}
