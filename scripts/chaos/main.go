// Command chaos runs the chaos harness of internal/chaos on a live DVM of
// virtual nodes: a seeded sequence of resource changes and faults, every
// invariant of docs/reliability.md checked after every step. `make chaos`
// runs it; a failure prints the seed and the step, and
//
//	go run ./scripts/chaos -seed N -steps M -faults LIST
//
// replays it. It exits 1 if an invariant broke or anything was left
// running, 2 on bad flags.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/chaos"
	"github.com/dynrt/dynrt/wire"
)

func main() {
	os.Exit(run())
}

func run() int {
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the step sequence (printed; the same seed replays the same steps)")
	steps := flag.Int("steps", 200, "number of steps")
	faults := flag.String("faults", "all", "fault kinds to inject, comma-separated, or all: "+chaos.FaultNames(chaos.AllFaults))
	rate := flag.Float64("fault-rate", 0.35, "probability that a step injects a fault")
	nodes := flag.Int("nodes", 4, "virtual nodes")
	slots := flag.Int("slots", 4, "slots per node")
	dynrun := flag.String("dynrun", "bin/dynrun", "the dynrun binary")
	malleable := flag.String("malleable", "bin/malleable", "the malleable test program (go build -o bin/malleable ./internal/malleable)")
	elastic := flag.Bool("elastic", false, "nodes join and leave too: dvm grow and dvm shrink --drain steps (another step sequence per seed)")
	replace := flag.Bool("replace", false, "REPLACE requests too: an operator replacing a process (another step sequence per seed)")
	stop := flag.Bool("stop", false, "stop at the first step that breaks an invariant")
	quiet := flag.Bool("quiet", false, "print only violations and the summary, not every step")
	radix := flag.Int("tree-radix", 0, "the DVM's --tree-radix: pushes to more daemons than this go down a tree of daemons (0: from the master to each)")
	policy := flag.String("policy", "", "failure policy of every job: shrink or replace (each loss becomes a failure change, a SUB or a REPLACE of the lost ranks, docs/rc.md), or empty for the steps' own choice (abort or --keep-going)")
	keep := flag.String("keep", "", "make this directory (it must not exist) and keep there the DVMs' directory and each job's output (<app>.out), instead of a temporary directory removed at the end")
	flag.Parse()
	fs, err := chaos.ParseFaults(*faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for _, p := range []*string{dynrun, malleable} {
		if *p, err = filepath.Abs(*p); err == nil {
			_, err = os.Stat(*p)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v (run `make build` and go build -o bin/malleable ./internal/malleable, or use -dynrun/-malleable)\n", err)
			return 2
		}
	}
	if *policy != "" && *policy != wire.OnFailureShrink && *policy != wire.OnFailureReplace {
		fmt.Fprintf(os.Stderr, "chaos: -policy %q: want shrink, replace or nothing\n", *policy)
		return 2
	}
	dir := *keep
	if dir != "" {
		err = os.Mkdir(dir, 0o700)
	} else if dir, err = os.MkdirTemp("", "dynrt-chaos-"); err == nil {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	mark := make([]byte, 8)
	_, _ = rand.Read(mark)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	cfg := chaos.Config{
		Dynrun: *dynrun, Malleable: *malleable, Dir: filepath.Join(dir, "d"), Mark: "chaos-" + hex.EncodeToString(mark),
		Seed: *seed, Steps: *steps, Faults: fs, FaultRate: *rate, Nodes: *nodes, Slots: *slots, StopAtViolation: *stop,
		DVMArgs: []string{"--tree-radix", strconv.Itoa(*radix)}, Elastic: *elastic, Replace: *replace,
		Policy: *policy,
	}
	if *keep != "" {
		cfg.JobLogs = dir
	}
	if *quiet {
		cfg.Log = violationsOnly{os.Stdout}
	} else {
		cfg.Log = os.Stdout
	}
	sum, err := chaos.Run(ctx, cfg)
	fmt.Print(sum)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	if len(sum.Violations) > 0 || len(sum.Leftover) > 0 {
		replay := fmt.Sprintf("go run ./scripts/chaos -seed %d -steps %d -faults %s -fault-rate %g", *seed, *steps, chaos.FaultNames(fs), *rate)
		if *policy != "" {
			replay += " -policy " + *policy
		}
		if *elastic {
			replay += " -elastic"
		}
		if *replace {
			replay += " -replace"
		}
		fmt.Println("replay: " + replay)
		return 1
	}
	return 0
}

// violationsOnly passes on the log writes that report a violation or a
// harness problem (each is one write), and drops the step lines.
type violationsOnly struct{ w *os.File }

func (v violationsOnly) Write(p []byte) (int, error) {
	if s := string(p); strings.HasPrefix(s, "VIOLATION") || strings.HasPrefix(s, "chaos:") {
		return v.w.Write(p)
	}
	return len(p), nil
}
