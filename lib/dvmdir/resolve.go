package dvmdir

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Resolve picks the DVM a tool talks to. sel is the --dvm value; when it is
// empty $DYNRT_DVM is used, and when that is empty too, the only live DVM in
// dir. A selection is one of:
//
//	ID or NAME   a live DVM in dir (ids are matched before names)
//	file:PATH    the rendezvous file at PATH, in any directory
//	uri:ADDR     a master address with no file: unix:///path/to.sock or
//	             tcp://host:port
//
// A uri: result has only Socket or TCP set, Token taken from $DYNRT_TOKEN,
// and no ID or PID: the caller learns the rest from the master's hello. A tcp
// address needs the token (the master demands it on TCP); a unix socket does
// not (the master checks the peer's uid instead).
//
// Resolving through dir drops stale files as List does. Errors: a selection
// that names no live DVM is wire.ErrNotFound and lists the live ones; no DVM
// at all is wire.ErrNotFound and says how to start one; several live DVMs
// and no selection is wire.ErrInvalid and lists them.
func Resolve(dir, sel string, env func(string) string) (Info, error) {
	origin := "--dvm"
	if sel == "" {
		sel, origin = env(EnvDVM), "$"+EnvDVM
	}
	switch {
	case strings.HasPrefix(sel, "file:"):
		return resolveFile(strings.TrimPrefix(sel, "file:"), origin)
	case strings.HasPrefix(sel, "uri:"):
		return resolveURI(strings.TrimPrefix(sel, "uri:"), origin, env(EnvToken))
	}
	live, stale, err := List(dir)
	if err != nil {
		return Info{}, err
	}
	info, err := choose(live, sel, origin, dir, time.Now())
	if err != nil {
		// The DVM the user wanted may be the one that just crashed.
		for _, s := range stale {
			if s.Log != "" {
				err = fmt.Errorf("%w\n(DVM %s is gone: %s; its log is kept in %s)", err, s.Info.ID, s.Reason, s.Log)
			}
		}
	}
	return info, err
}

func resolveFile(path, origin string) (Info, error) {
	if path == "" {
		return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s file: needs a path", origin)
	}
	info, err := Read(path)
	if err != nil {
		return Info{}, err
	}
	if reason := currentSystem().deadReason(info); reason != "" {
		return Info{}, wire.Errorf(wire.ErrNotFound, "dvmdir: DVM %s in %s is not running: %s", info.ID, path, reason)
	}
	return info, nil
}

func resolveURI(addr, origin, token string) (Info, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s uri: %w", origin, err)
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s uri:%s: want unix:///absolute/path", origin, addr)
		}
		return Info{Socket: u.Path, Token: token}, nil
	case "tcp":
		if _, _, err := net.SplitHostPort(u.Host); err != nil || u.Path != "" {
			return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s uri:%s: want tcp://host:port", origin, addr)
		}
		if token == "" {
			return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s uri:%s: a TCP address needs the DVM token in $%s", origin, addr, EnvToken)
		}
		return Info{TCP: u.Host, Token: token}, nil
	}
	return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s uri:%s: scheme must be unix or tcp", origin, addr)
}

// choose applies an id/name selection (or none) to the live DVMs of dir.
func choose(live []Info, sel, origin, dir string, now time.Time) (Info, error) {
	const start = "start one with `dynrun dvm start`"
	const pick = "choose one with --dvm ID|NAME or $" + EnvDVM
	if sel == "" {
		switch len(live) {
		case 0:
			return Info{}, wire.Errorf(wire.ErrNotFound, "dvmdir: no running DVM in %s; %s", dir, start)
		case 1:
			return live[0], nil
		}
		return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %d DVMs are running; %s:%s", len(live), pick, describe(live, now))
	}
	for _, i := range live {
		if i.ID == sel {
			return i, nil
		}
	}
	var named []Info
	for _, i := range live {
		if i.Name == sel {
			named = append(named, i)
		}
	}
	switch {
	case len(named) == 1:
		return named[0], nil
	case len(named) > 1:
		return Info{}, wire.Errorf(wire.ErrInvalid, "dvmdir: %s %q names %d DVMs; use the id:%s", origin, sel, len(named), describe(named, now))
	case len(live) == 0:
		return Info{}, wire.Errorf(wire.ErrNotFound, "dvmdir: %s %q: no running DVM in %s; %s", origin, sel, dir, start)
	}
	return Info{}, wire.Errorf(wire.ErrNotFound, "dvmdir: %s %q names no running DVM; %s:%s", origin, sel, pick, describe(live, now))
}

// describe lists DVMs one per line: id, name, age, master pid, node count.
func describe(dvms []Info, now time.Time) string {
	var b strings.Builder
	for _, i := range dvms {
		name := "-"
		if i.Name != "" {
			name = i.Name
		}
		fmt.Fprintf(&b, "\n  %-8s  %-12s  up %-10s  pid %-7d  nodes %d", i.ID, name, i.Uptime(now), i.PID, i.Nodes)
	}
	return b.String()
}
