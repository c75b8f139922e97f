package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/wire"
)

// eventJSON is one line of `watch --json`.
type eventJSON struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // pset.def or pset.del
	Job     string    `json:"job"`
	Name    string    `json:"name"`
	Version uint32    `json:"version"`
	Epoch   uint32    `json:"epoch"`
	Size    uint32    `json:"size"`
	Active  bool      `json:"active"`
}

// watchBuffer bounds the events waiting to be printed. The master drops a
// tool that does not keep up; this keeps the connection's reader from
// ever blocking on a slow stdout.
const watchBuffer = 4096

func runWatch(e *env, c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if c.Int("count") < 0 {
		return cliutil.Usagef("--count must not be negative")
	}
	cl, err := e.attach(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := wire.EventSubReq{Kinds: []string{"pset."}}
	if sel := c.String("job"); sel != "" {
		js, err := e.jobs(cl)
		if err != nil {
			return err
		}
		j, err := findJob(js, sel, cl.Info().ID)
		if err != nil {
			return err
		}
		req.Job = j.Job
	}
	events := make(chan wire.Event, watchBuffer)
	overflow := make(chan struct{})
	ctx, cancel := e.call()
	_, err = cl.Subscribe(ctx, req, func(ev wire.Event) {
		select {
		case events <- ev:
		default:
			select {
			case <-overflow:
			default:
				close(overflow)
			}
		}
	})
	cancel()
	if err != nil {
		return fail(err)
	}
	enc := json.NewEncoder(e.out)
	enc.SetEscapeHTML(false)
	left := c.Int("count")
	for {
		select {
		case ev := <-events:
			if err := printEvent(e, enc, c.Bool("json"), ev); err != nil {
				return fail(err)
			}
			if left > 0 {
				if left--; left == 0 {
					return nil
				}
			}
		case <-overflow:
			return failf("fell behind the DVM's events (output too slow); events were lost")
		case <-cl.Done():
			// Print what arrived before the connection went away.
		drain:
			for {
				select {
				case ev := <-events:
					if err := printEvent(e, enc, c.Bool("json"), ev); err != nil {
						return fail(err)
					}
				default:
					break drain
				}
			}
			fmt.Fprintf(e.errw, "dynpset: DVM %s has stopped\n", cl.Info().ID)
			return nil
		case <-e.ctx.Done():
			return nil
		}
	}
}

func printEvent(e *env, enc *json.Encoder, asJSON bool, ev wire.Event) error {
	var p wire.PsetInfo
	if ev.Pset != nil {
		p = *ev.Pset
	}
	if asJSON {
		return enc.Encode(eventJSON{
			Seq: ev.Seq, Time: time.Unix(0, ev.Time).UTC(), Kind: ev.Kind, Job: ev.Job, Name: p.Name,
			Version: p.Version, Epoch: p.Epoch, Size: p.Size, Active: p.Active,
		})
	}
	var err error
	switch ev.Kind {
	case wire.EvPsetDef:
		act := "inactive"
		if p.Active {
			act = "active"
		}
		verb := "defined"
		if p.Version > 0 {
			verb = "updated"
		}
		_, err = fmt.Fprintf(e.out, "%s  %s  %-8s %s  v%d e%d size %d %s\n", tsString(ev.Time), ev.Job, verb, p.Name, p.Version, p.Epoch, p.Size, act)
	case wire.EvPsetDel:
		_, err = fmt.Fprintf(e.out, "%s  %s  %-8s %s\n", tsString(ev.Time), ev.Job, "deleted", p.Name)
	default:
		_, err = fmt.Fprintf(e.out, "%s  %s  %-8s %s %s\n", tsString(ev.Time), ev.Job, ev.Kind, p.Name, ev.Msg)
	}
	return err
}
