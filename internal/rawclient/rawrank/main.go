// Command rawrank is a malleable rank that speaks the wire protocol with
// raw frames (internal/rawclient: a generic msgpack library and maps, as a
// client in another language would), after internal/malleable: it adapts
// to every resource change bound to its set (phase 2: one set operation
// by the root; phase 3: one rc.accept per call, or one rc.confirm for a
// process an ADD or a REPLACE started) and prints the same lines:
//
//	CONFIRMED  a new process confirmed (rank, delta, set, version)
//	STATE      a change this process took part in ended (rank, delta, status, set, version)
//	LEFT       a SUB removed this process, or a REPLACE replaced it (it exits 0)
//	DONE       the process ends after change -last
//	ERROR      a step failed (exit code 1)
//
// With -session PROG, the odd ranks exec PROG with the arguments after
// "--" instead (PROG is internal/malleable, on lib/session): one job then
// has ranks of two client implementations.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/rawclient"
)

type M = rawclient.M

// step bounds every request (and so every wait of phase 3).
const step = 20 * time.Second

func main() {
	session := flag.String("session", "", "program the odd ranks run instead (with the arguments after --)")
	last := flag.Int("last", 0, "exit once change number N has ended")
	timeout := flag.Duration("timeout", 60*time.Second, "overall limit")
	flag.Parse()
	rank, _ := strconv.Atoi(os.Getenv("DYNRT_RANK"))
	if *session != "" && rank%2 == 1 {
		argv := append([]string{*session}, flag.Args()...)
		err := syscall.Exec(*session, argv, os.Environ())
		fail(fmt.Errorf("exec %s: %w", *session, err))
	}
	time.AfterFunc(*timeout, func() { fail(fmt.Errorf("still running after %v", *timeout)) })
	if err := run(*last); err != nil {
		fail(err)
	}
}

func say(word string, v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(word, string(b))
}

func fail(err error) {
	say("ERROR", map[string]any{"rank": os.Getenv("DYNRT_RANK"), "err": err.Error()})
	os.Exit(1)
}

type proc struct {
	c       *rawclient.Conn
	me      uint32
	app     string
	set     string // the set this process works with
	version uint64
	done    map[string]bool
}

func run(last int) error {
	c, job, me, err := rawclient.Dial()
	if err != nil {
		return err
	}
	info, err := c.Call("session.init", M{"j": job, "r": me, "pid": os.Getpid()}, step)
	if err != nil {
		return fmt.Errorf("session.init: %w", err)
	}
	p := &proc{c: c, me: me, app: rawclient.Str(info, "app"), done: map[string]bool{}}
	p.set = "mpi://app/" + p.app

	// A process started by an ADD or a REPLACE confirms first.
	q, err := c.Call("rc.query", M{"b": "mpi://SELF"}, step)
	if err != nil {
		return fmt.Errorf("rc.query: %w", err)
	}
	if rc := rawclient.Map(q, "rc"); q["incl"] == true && (rawclient.Str(rc, "t") == "ADD" || rawclient.Str(rc, "t") == "REPLACE") &&
		(rawclient.Str(rc, "st") == "ANNOUNCED" || rawclient.Str(rc, "st") == "PENDING") {
		delta := rawclient.Str(rc, "d")
		rep, err := c.Call("rc.confirm", M{"d": delta, "tmo": step.Milliseconds()}, step+time.Second)
		if err != nil {
			return fmt.Errorf("rc.confirm %s: %w", delta, err)
		}
		set := rawclient.Map(rep, "set")
		p.set, p.version = rawclient.Str(set, "n"), rawclient.Uint(set["ver"])
		p.done[delta] = true
		say("CONFIRMED", map[string]any{"rank": me, "delta": delta, "set": p.set, "version": p.version})
		p.report(delta, rawclient.Str(rep, "st"))
	}
	for {
		q, err := c.Call("rc.query", M{"b": p.set}, step)
		if err != nil {
			return fmt.Errorf("rc.query: %w", err)
		}
		rc := rawclient.Map(q, "rc")
		delta, st := rawclient.Str(rc, "d"), rawclient.Str(rc, "st")
		switch {
		case rc == nil || p.done[delta]:
		case st == "ANNOUNCED" || st == "PENDING":
			p.done[delta] = true
			left, err := p.adapt(rc)
			if err != nil || left {
				return err
			}
			continue
		case st == "ABORTED":
			p.done[delta] = true
			p.report(delta, st)
		}
		if last > 0 {
			q, err := c.Call("rc.query", M{"d": "mpi://rte/" + p.app + "/rc/" + strconv.Itoa(last)}, step)
			if st := rawclient.Str(rawclient.Map(q, "rc"), "st"); err == nil && (st == "FINALIZED" || st == "ABORTED") {
				say("DONE", map[string]any{"rank": me, "set": p.set, "version": p.version, "last": st})
				_, err := c.Call("session.fin", M{}, step)
				return err
			}
		}
		time.Sleep(10 * time.Millisecond) // no events: poll, as a simple client may
	}
}

// adapt runs phases 2 and 3 of one change; left reports that the change
// removed this process.
func (p *proc) adapt(rc M) (bool, error) {
	c := p.c
	delta, typ := rawclient.Str(rc, "d"), rawclient.Str(rc, "t")
	// The members of the bound set's version of the announcement; the
	// lowest is the root.
	var ver uint64 // absent: version 0
	bv, _ := rc["bv"].([]any)
	for _, b := range bv {
		if b, _ := b.(M); rawclient.Str(b, "n") == p.set {
			ver = rawclient.Uint(b["ver"])
		}
	}
	info, err := c.Call("pset.get", M{"n": p.set, "ver": ver, "m": true}, step)
	if err != nil {
		return false, fmt.Errorf("pset.get %s@%v: %w", p.set, ver, err)
	}
	req := M{"d": delta, "b": p.set, "tmo": step.Milliseconds()}
	if members := rawclient.Ranks(info["m"]); len(members) > 0 && members[0] == p.me {
		// Phase 2: ADD: UNION(set, delta); SUB: DIFFERENCE(set, delta);
		// REPLACE: UNION with the delta, then DIFFERENCE with the
		// replaced set.
		steps := [][2]string{{"union", delta}}
		switch typ {
		case "SUB":
			steps = [][2]string{{"difference", delta}}
		case "REPLACE":
			steps = append(steps, [2]string{"difference", rawclient.Str(rc, "os")})
		}
		var res M
		for _, s := range steps {
			if res, err = c.Call("pset.op", M{"op": s[0], "p1": p.set, "p2": s[1], "t": p.set}, step); err != nil {
				break
			}
		}
		switch {
		case rawclient.CodeOf(err) == "aborted":
			// Accept without a set: every member learns the abort.
		case err != nil:
			return false, fmt.Errorf("pset.op for %s: %w", delta, err)
		default:
			req["set"] = M{"n": rawclient.Str(res, "n"), "ver": res["ver"]}
		}
	}
	rep, err := c.Call("rc.accept", req, step+time.Second)
	for err == nil && rawclient.Str(rep, "st") == "PENDING" && typ != "SUB" {
		// Ask again once the change is no longer PENDING: every member
		// makes as many calls as the others.
		for {
			q, qerr := c.Call("rc.query", M{"d": delta}, step)
			if qerr != nil {
				return false, qerr
			}
			if rawclient.Str(rawclient.Map(q, "rc"), "st") != "PENDING" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		rep, err = c.Call("rc.accept", req, step+time.Second)
	}
	if rawclient.CodeOf(err) == "aborted" {
		p.report(delta, "ABORTED")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rc.accept %s: %w", delta, err)
	}
	if rep["term"] == true {
		say("LEFT", map[string]any{"rank": p.me, "delta": delta})
		_, err := c.Call("session.fin", M{}, step)
		return true, err
	}
	if set := rawclient.Map(rep, "set"); rawclient.Str(set, "n") != "" {
		p.set, p.version = rawclient.Str(set, "n"), rawclient.Uint(set["ver"])
	}
	p.report(delta, rawclient.Str(rep, "st"))
	return false, nil
}

func (p *proc) report(delta, status string) {
	say("STATE", map[string]any{"rank": p.me, "delta": delta, "status": status, "set": p.set, "version": p.version})
}
