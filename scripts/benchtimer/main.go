// Command benchtimer runs benchmark variants alternately and prints their
// median times and the ratio to the variant named "hydra" with the same N,
// as a markdown table. scripts/bench-launch.sh and scripts/bench-mpi.sh use
// it. Spec lines on stdin: variant TAB n TAB [VAR=VAL TAB ...] argv...
//
// With -expect S a run counts only if its stdout holds S exactly n times
// (e.g. one "hello rank=" line per MPI process).
//
// A field "@then" ends the timed command: what follows it runs after each
// run, untimed (e.g. `dvm stop` after a timed `dvm start`); if it fails, the
// variant is reported as failed. -peers names the variants that get a
// ratio column (default hydra); scripts/bench-hosts.sh uses both.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

type variant struct {
	name  string
	n     int
	env   []string
	argv  []string
	then  []string // untimed, after each run
	times []time.Duration
	err   string
}

// parseSpec reads one spec line: variant TAB n TAB [VAR=VAL TAB ...] argv...
// [TAB @then TAB argv...]. ok is false for a line with too few fields.
func parseSpec(line string) (v *variant, ok bool) {
	f := strings.Split(line, "\t")
	if len(f) < 3 {
		return nil, false
	}
	n, _ := strconv.Atoi(f[1])
	v = &variant{name: f[0], n: n}
	rest := f[2:]
	for len(rest) > 0 && strings.Contains(rest[0], "=") && !strings.HasPrefix(rest[0], "/") {
		v.env, rest = append(v.env, rest[0]), rest[1:]
	}
	for i, a := range rest {
		if a == "@then" {
			rest, v.then = rest[:i], rest[i+1:]
			break
		}
	}
	v.argv = rest
	return v, len(v.argv) > 0
}

// run times one run. timeout stops a run that hangs (mpirun.openmpi does at
// N >= 56 on some machines); the variant is then reported as failed.
func (v *variant) run(timeout time.Duration, expect string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.argv[0], v.argv[1:]...)
	cmd.Env = append(os.Environ(), v.env...)
	var errb, outb strings.Builder
	cmd.Stderr = &errb
	if expect != "" {
		cmd.Stdout = &outb
	}
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if ctx.Err() != nil {
		return d, fmt.Errorf("no exit after %s: killed", timeout)
	}
	if err != nil {
		return d, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	if expect != "" {
		if got := strings.Count(outb.String(), expect); got != v.n {
			return d, fmt.Errorf("%d lines with %q, want %d", got, expect, v.n)
		}
	}
	if len(v.then) > 0 {
		then := exec.CommandContext(ctx, v.then[0], v.then[1:]...)
		then.Env = cmd.Env
		if out, err := then.CombinedOutput(); err != nil {
			return d, fmt.Errorf("after the run, %s: %v: %s", strings.Join(v.then, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return d, nil
}

func pct(ts []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 0 && p == 50 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[int(float64(len(s)-1)*p/100+0.5)]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

func main() {
	rounds := flag.Int("rounds", 20, "counted rounds")
	warmup := flag.Int("warmup", 2, "uncounted runs per variant")
	timeout := flag.Duration("timeout", 60*time.Second, "a run taking longer is killed and its variant reported as failed")
	expect := flag.String("expect", "", "a run must print this string exactly n times on stdout")
	seed := flag.Uint64("seed", 1, "seed of the run order")
	peers := flag.String("peers", "hydra", "comma-separated variants to give a ratio column (to the peer with the same N)")
	flag.Parse()
	var vs []*variant
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if v, ok := parseSpec(sc.Text()); ok {
			vs = append(vs, v)
		}
	}
	for _, v := range vs {
		for i := 0; i < *warmup && v.err == ""; i++ {
			if _, err := v.run(*timeout, *expect); err != nil {
				v.err = err.Error()
			}
		}
	}
	rng := rand.New(rand.NewPCG(*seed, *seed+1))
	for r := 0; r < *rounds; r++ {
		order := rng.Perm(len(vs))
		for _, i := range order {
			v := vs[i]
			if v.err != "" {
				continue
			}
			d, err := v.run(*timeout, *expect)
			if err != nil {
				v.err = err.Error()
				continue
			}
			v.times = append(v.times, d)
		}
	}
	names := strings.Split(*peers, ",")
	peer := make([]map[int]time.Duration, len(names)) // per peer: its median by N
	head, rule := "| N | variant | median ms | p10 ms | p90 ms |", "|---:|---|---:|---:|---:|"
	for i, name := range names {
		peer[i] = map[int]time.Duration{}
		for _, v := range vs {
			if v.name == name && v.err == "" {
				peer[i][v.n] = pct(v.times, 50)
			}
		}
		title := name
		if name == "hydra" {
			title = "Hydra"
		}
		head += " ratio to " + title + " |"
		rule += "---:|"
	}
	fmt.Printf("%s\n%s\n", head, rule)
	for _, v := range vs {
		if v.err != "" {
			fmt.Printf("| %d | %s | failed | | |%s\n", v.n, v.name, strings.Repeat(" |", len(names)))
			fmt.Fprintf(os.Stderr, "# %s N=%d failed: %s\n", v.name, v.n, v.err)
			continue
		}
		med := pct(v.times, 50)
		row := fmt.Sprintf("| %d | %s | %s | %s | %s |", v.n, v.name, ms(med), ms(pct(v.times, 10)), ms(pct(v.times, 90)))
		for i := range names {
			ratio := "-"
			if p, ok := peer[i][v.n]; ok {
				ratio = strconv.FormatFloat(float64(med)/float64(p), 'f', 2, 64)
			}
			row += " " + ratio + " |"
		}
		fmt.Println(row)
	}
}
