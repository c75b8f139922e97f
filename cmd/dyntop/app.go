package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"
	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/lib/top"
	"github.com/dynrt/dynrt/wire"
)

// tickEvery is the clock of the screen: uptime and the elapsed time of
// changes in flight. Data never comes from polling: it is pushed.
const tickEvery = 250 * time.Millisecond

// How --once collects the recent events for its log: until none came for
// historyQuiet, at most historyMax.
const (
	historyQuiet = 100 * time.Millisecond
	historyMax   = time.Second
)

// Main is dyntop: a live terminal monitor of a DVM. Exit status: 0 ok
// (including the DVM stopping while watched), 1 error (no DVM), 2 bad
// command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "dyntop",
		Usage:     "watch a dynrt DVM live: nodes, slots, jobs, process sets, resource changes",
		UsageText: "dyntop [--dvm X] [--readonly] [--wait] [--once [--width W --height H]]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dvm", Usage: "DVM `X`: id, name, file:PATH or uri:ADDR (default $DYNRT_DVM, else the only running DVM)"},
			&cli.BoolFlag{Name: "readonly", Usage: "never change anything: the a/s keys are disabled"},
			&cli.BoolFlag{Name: "wait", Usage: "when the DVM stops (or is not running yet), wait for it instead of exiting"},
			&cli.BoolFlag{Name: "once", Usage: "print one plain-text snapshot and exit (also when stdout is not a terminal)"},
			&cli.IntFlag{Name: "width", Usage: "width `W` of the --once snapshot (default: the terminal's, else 80)"},
			&cli.IntFlag{Name: "height", Usage: "height `H` of the --once snapshot (default: the terminal's, else 24)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cliutil.Usagef("unexpected argument %q", c.Args().First())
			}
			if c.Int("width") < 0 || c.Int("height") < 0 {
				return cliutil.Usagef("--width and --height must be positive")
			}
			return runTop(c, stdout, stderr)
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

func runTop(c *cli.Context, stdout, stderr io.Writer) error {
	ctx := c.Context
	opts := tool.Options{Sel: c.String("dvm"), Name: "dyntop"}
	tty := isTerminal(stdout)
	if c.Bool("once") || !tty {
		return once(ctx, c, opts, stdout, tty)
	}

	attach := func() (*tool.Client, error) {
		actx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return tool.Attach(actx, opts)
	}
	cl, err := attach()
	if err != nil && !c.Bool("wait") {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}

	r := lipgloss.NewRenderer(stdout)
	if os.Getenv("NO_COLOR") != "" {
		r.SetColorProfile(termenv.Ascii)
	}
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	f := &feeder{opts: opts, wait: c.Bool("wait")}
	m := top.New(top.Config{
		Renderer: r, ReadOnly: c.Bool("readonly"), Wait: c.Bool("wait"), Now: time.Now(),
		Request: f.request(fctx),
		Tick: func() tea.Cmd {
			return tea.Tick(tickEvery, func(t time.Time) tea.Msg { return top.TickMsg(t) })
		},
	})
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithOutput(stdout))
	f.send = p.Send
	if cl == nil {
		p.Send(top.LostMsg{At: time.Now(), Err: err})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.run(fctx, cl)
	}()
	_, perr := p.Run()
	stop()
	<-done
	if perr != nil && !errors.Is(perr, tea.ErrProgramKilled) && !errors.Is(perr, context.Canceled) {
		return cliutil.Exitf(cliutil.ExitFail, "%v", perr)
	}
	if lost := m.Lost(); lost != nil {
		fmt.Fprintf(stderr, "dyntop: DVM %s has stopped\n", orDash(m.State().ID))
	}
	return nil
}

// once prints one plain snapshot: the screen dyntop would show, without
// colour and without trailing blanks.
func once(ctx context.Context, c *cli.Context, opts tool.Options, stdout io.Writer, tty bool) error {
	actx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cl, err := tool.Attach(actx, opts)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	defer cl.Close()
	// The recent events the master keeps, for the log: they arrive right
	// after the subscription; wait until they stop.
	var mu sync.Mutex
	var history []wire.Event
	last := make(chan struct{}, 1)
	if _, err := cl.Subscribe(actx, wire.EventSubReq{Kinds: subscribed, Since: 1}, func(ev wire.Event) {
		mu.Lock()
		history = append(history, ev)
		mu.Unlock()
		select {
		case last <- struct{}{}:
		default:
		}
	}); err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	snap, sets, err := takeSnapshot(ctx, cl)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	quiet := time.NewTimer(historyQuiet)
	limit := time.NewTimer(historyMax)
wait:
	for {
		select {
		case <-last:
			quiet.Reset(historyQuiet)
		case <-quiet.C:
			break wait
		case <-limit.C:
			break wait
		}
	}
	limit.Stop()
	mu.Lock()
	evs := append([]wire.Event(nil), history...)
	mu.Unlock()
	w, h := 80, 24
	if tty {
		if f, ok := stdout.(*os.File); ok {
			if tw, th, err := term.GetSize(f.Fd()); err == nil && tw > 0 && th > 0 {
				w, h = tw, th
			}
		}
	}
	if v := c.Int("width"); v > 0 {
		w = v
	}
	if v := c.Int("height"); v > 0 {
		h = v
	}
	r := lipgloss.NewRenderer(stdout)
	r.SetColorProfile(termenv.Ascii)
	m := top.New(top.Config{Renderer: r, ReadOnly: true, Now: snap.At})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(top.SnapshotMsg(snap))
	m.Update(top.EventsMsg(evs)) // older than the snapshot: the log only
	for _, s := range sets {
		m.Update(s)
	}
	var b strings.Builder
	for _, line := range strings.Split(m.View(), "\n") {
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteByte('\n')
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
