package pmi

import (
	"bytes"
	"strconv"

	"github.com/dynrt/dynrt/wire"
)

// Bounds on what a spawn request may ask for, so that a broken or hostile
// client cannot make the daemon allocate without limit.
const (
	MaxSpawnApps  = 1024    // executable blocks per spawn
	MaxSpawnProcs = 1 << 20 // processes per block
	MaxSpawnArgs  = 4096    // arguments per block
	MaxSpawnKeys  = 1024    // preput or info pairs
	maxSegLines   = MaxSpawnArgs + 2*MaxSpawnKeys*2 + 16
)

// SpawnApp is one executable block of a spawn (one command of
// MPI_Comm_spawn_multiple).
type SpawnApp struct {
	Cmd      string   // program as the application named it
	Args     []string // argv[1:]
	MaxProcs int      // processes to start (at least 1)
	Info     []Pair   // MPI_Info keys passed through (wdir, path, host, ...)
}

// Spawn is a decoded spawn request: new processes numbered 0.. across the
// blocks, in order, with appnum = block index.
type Spawn struct {
	Apps   []SpawnApp
	Preput []Pair // stored in the new job's key-value space before it starts
}

// Procs returns the total number of processes.
func (s *Spawn) Procs() int {
	n := 0
	for _, a := range s.Apps {
		n += a.MaxProcs
	}
	return n
}

// SpawnCollector assembles PMI-1's multi-line spawn: one segment per
// executable, each `mcmd=spawn`, key=value lines (a value may hold spaces
// and '='), `endcmd`; the request is complete when the segment with
// spawnssofar == totspawns has ended. The client writes a segment in
// several pieces, so lines are fed one at a time.
type SpawnCollector struct {
	spawn   Spawn
	total   int // totspawns of the first segment
	inSeg   bool
	lines   int
	seg     map[string]string // current segment, first occurrence wins
	order   []string
	err     error // first problem; reported once the request is complete
	started bool
}

// Begin starts a segment (the caller has just read `mcmd=spawn`).
func (c *SpawnCollector) Begin() {
	c.started = true
	c.inSeg = true
	c.lines = 0
	c.seg = make(map[string]string)
	c.order = c.order[:0]
}

// Active reports whether the collector is inside a segment.
func (c *SpawnCollector) Active() bool { return c.inSeg }

// Feed takes one line of a segment (without its newline). done is true
// once the whole request has arrived; the result is then in Result. An
// error means the stream cannot be followed (the caller should give up on
// the connection); problems with the content are kept for Result instead,
// so that the client still gets its one reply.
func (c *SpawnCollector) Feed(line []byte) (done bool, err error) {
	if !c.inSeg {
		return false, wire.Errorf(wire.ErrState, "pmi: spawn line outside a segment")
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if string(line) == "endcmd" {
		c.inSeg = false
		return c.endSegment(), nil
	}
	c.lines++
	if c.lines > maxSegLines {
		return false, wire.Errorf(wire.ErrTooLarge, "pmi: spawn segment of more than %d lines", maxSegLines)
	}
	k, v, ok := bytes.Cut(line, []byte("="))
	if !ok || len(k) == 0 {
		c.fail(wire.Errorf(wire.ErrMalformed, "pmi: spawn line %q is not key=value", clip(line)))
		return false, nil
	}
	key := string(k)
	if _, dup := c.seg[key]; !dup {
		c.seg[key] = string(v)
		c.order = append(c.order, key)
	}
	return false, nil
}

func (c *SpawnCollector) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// endSegment decodes the segment just ended and says whether it was the
// last one.
func (c *SpawnCollector) endSegment() bool {
	get := func(k string) (int, bool) {
		v, ok := c.seg[k]
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	total, okT := get("totspawns")
	sofar, okS := get("spawnssofar")
	if !okT || !okS || total < 1 || total > MaxSpawnApps || sofar < 1 {
		// Without a usable count we cannot know how many segments follow:
		// answer now.
		c.fail(wire.Errorf(wire.ErrMalformed, "pmi: spawn segment without valid totspawns/spawnssofar"))
		return true
	}
	if c.total == 0 {
		c.total = total
	} else if total != c.total {
		c.fail(wire.Errorf(wire.ErrMalformed, "pmi: totspawns changed from %d to %d", c.total, total))
	}
	if sofar != len(c.spawn.Apps)+1 {
		c.fail(wire.Errorf(wire.ErrMalformed, "pmi: spawn segment %d arrived as number %d", sofar, len(c.spawn.Apps)+1))
	}
	app, err := decodeSegment(c.seg, get)
	if err != nil {
		c.fail(err)
	}
	c.spawn.Apps = append(c.spawn.Apps, app)
	if len(c.spawn.Apps) == 1 {
		pre, err := numbered(c.seg, get, "preput_num", "preput_key_%d", "preput_val_%d")
		if err != nil {
			c.fail(err)
		}
		c.spawn.Preput = pre
	}
	return sofar >= c.total || len(c.spawn.Apps) >= c.total
}

func decodeSegment(seg map[string]string, get func(string) (int, bool)) (SpawnApp, error) {
	var a SpawnApp
	n, ok := get("nprocs")
	if !ok || n < 1 || n > MaxSpawnProcs {
		return a, wire.Errorf(wire.ErrInvalid, "pmi: spawn segment with nprocs %q", seg["nprocs"])
	}
	a.MaxProcs = n
	a.Cmd = seg["execname"]
	if a.Cmd == "" {
		return a, wire.Errorf(wire.ErrInvalid, "pmi: spawn segment without execname")
	}
	argc, ok := get("argcnt")
	if !ok {
		argc = 0
	}
	if argc < 0 || argc > MaxSpawnArgs {
		return a, wire.Errorf(wire.ErrInvalid, "pmi: spawn segment with argcnt %d", argc)
	}
	for i := 1; i <= argc; i++ {
		v, ok := seg["arg"+strconv.Itoa(i)]
		if !ok {
			return a, wire.Errorf(wire.ErrInvalid, "pmi: spawn segment lacks arg%d of %d", i, argc)
		}
		a.Args = append(a.Args, v)
	}
	info, err := numbered(seg, get, "info_num", "info_key_%d", "info_val_%d")
	a.Info = info
	return a, err
}

// numbered reads <countKey>=N then N pairs named by the two patterns
// (0-based, "%d" replaced by the index).
func numbered(seg map[string]string, get func(string) (int, bool), countKey, keyPat, valPat string) ([]Pair, error) {
	n, ok := get(countKey)
	if !ok {
		return nil, nil
	}
	if n < 0 || n > MaxSpawnKeys {
		return nil, wire.Errorf(wire.ErrInvalid, "pmi: %s=%d", countKey, n)
	}
	out := make([]Pair, 0, n)
	for i := range n {
		ks := pat(keyPat, i)
		k, okK := seg[ks]
		v, okV := seg[pat(valPat, i)]
		if !okK || !okV {
			return out, wire.Errorf(wire.ErrInvalid, "pmi: %s says %d but %s is missing", countKey, n, ks)
		}
		out = append(out, Pair{k, v})
	}
	return out, nil
}

func pat(p string, i int) string {
	b, _, _ := bytes.Cut([]byte(p), []byte("%d"))
	return string(b) + strconv.Itoa(i)
}

// Result returns the decoded request once Feed said done, or the first
// problem found in it.
func (c *SpawnCollector) Result() (*Spawn, error) {
	if c.err != nil {
		return nil, c.err
	}
	s := c.spawn
	return &s, nil
}

// ParseSpawn2 decodes a PMI-2 spawn command: ncmds, preputcount with
// ppkeyI/ppvalI, then per executable subcmd, maxprocs, argc with argvI
// (0-based, as MPICH 4.0.x and Hydra use them) and infokeycount with
// infokeyI/infovalI. Each subcmd starts a new block, so repeated key
// names are read in order rather than first-wins.
func ParseSpawn2(c *Command) (*Spawn, error) {
	if c.Cmd != "spawn" {
		return nil, wire.Errorf(wire.ErrInvalid, "pmi: %s is not a spawn", c.Cmd)
	}
	s := &Spawn{}
	ncmds := -1
	preN := -1
	var cur *SpawnApp
	var argc, infoN int
	pending := map[string]string{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		for i := range argc {
			v, ok := pending["argv"+strconv.Itoa(i)]
			if !ok {
				return wire.Errorf(wire.ErrInvalid, "pmi: spawn of %s lacks argv%d of %d", cur.Cmd, i, argc)
			}
			cur.Args = append(cur.Args, v)
		}
		for i := range infoN {
			k, okK := pending["infokey"+strconv.Itoa(i)]
			v, okV := pending["infoval"+strconv.Itoa(i)]
			if !okK || !okV {
				return wire.Errorf(wire.ErrInvalid, "pmi: spawn of %s lacks info pair %d of %d", cur.Cmd, i, infoN)
			}
			cur.Info = append(cur.Info, Pair{k, v})
		}
		if cur.MaxProcs < 1 || cur.MaxProcs > MaxSpawnProcs {
			return wire.Errorf(wire.ErrInvalid, "pmi: spawn of %s with maxprocs %d", cur.Cmd, cur.MaxProcs)
		}
		s.Apps = append(s.Apps, *cur)
		cur = nil
		return nil
	}
	atoi := func(p Pair, lo, hi int) (int, error) {
		n, err := strconv.Atoi(p.Value)
		if err != nil || n < lo || n > hi {
			return 0, wire.Errorf(wire.ErrInvalid, "pmi: spawn %s=%q", p.Key, clip([]byte(p.Value)))
		}
		return n, nil
	}
	var err error
	for _, p := range c.Pairs {
		switch {
		case p.Key == "subcmd":
			if err := finish(); err != nil {
				return nil, err
			}
			if len(s.Apps) >= MaxSpawnApps {
				return nil, wire.Errorf(wire.ErrInvalid, "pmi: more than %d executables in a spawn", MaxSpawnApps)
			}
			if p.Value == "" {
				return nil, wire.Errorf(wire.ErrInvalid, "pmi: spawn with an empty subcmd")
			}
			cur = &SpawnApp{Cmd: p.Value}
			argc, infoN = 0, 0
			clear(pending)
		case cur == nil:
			switch p.Key {
			case "ncmds":
				if ncmds, err = atoi(p, 1, MaxSpawnApps); err != nil {
					return nil, err
				}
			case "preputcount":
				if preN, err = atoi(p, 0, MaxSpawnKeys); err != nil {
					return nil, err
				}
			default:
				if _, dup := pending[p.Key]; !dup {
					pending[p.Key] = p.Value
				}
			}
		case p.Key == "maxprocs":
			if cur.MaxProcs, err = atoi(p, 1, MaxSpawnProcs); err != nil {
				return nil, err
			}
		case p.Key == "argc":
			if argc, err = atoi(p, 0, MaxSpawnArgs); err != nil {
				return nil, err
			}
		case p.Key == "infokeycount":
			if infoN, err = atoi(p, 0, MaxSpawnKeys); err != nil {
				return nil, err
			}
		default:
			if len(pending) > 2*MaxSpawnArgs+4*MaxSpawnKeys {
				return nil, wire.Errorf(wire.ErrTooLarge, "pmi: spawn command too large")
			}
			if _, dup := pending[p.Key]; !dup {
				pending[p.Key] = p.Value
			}
		}
	}
	// Preput pairs precede the first subcmd (their names are unique, so
	// first-wins lookups in c are right).
	if preN > 0 {
		for i := range preN {
			k, okK := c.Get("ppkey" + strconv.Itoa(i))
			v, okV := c.Get("ppval" + strconv.Itoa(i))
			if !okK || !okV {
				return nil, wire.Errorf(wire.ErrInvalid, "pmi: spawn lacks preput pair %d of %d", i, preN)
			}
			s.Preput = append(s.Preput, Pair{k, v})
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if len(s.Apps) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "pmi: spawn without any subcmd")
	}
	if ncmds >= 0 && ncmds != len(s.Apps) {
		return nil, wire.Errorf(wire.ErrInvalid, "pmi: spawn says ncmds=%d but has %d executables", ncmds, len(s.Apps))
	}
	return s, nil
}
