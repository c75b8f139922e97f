package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// record is one line of a run: ROUND (one grow), RATE (one rate run) or
// HANG (a run of the peer that had to be killed; bench-spawn.sh writes it).
type record struct {
	Word  string
	Impl  string           `json:"impl"`
	K     int              `json:"k"`
	N     int              `json:"n"`
	NS    int64            `json:"ns"`
	Steps map[string]int64 `json:"steps"`
}

// parse reads "WORD {json}" lines; other lines are skipped.
func parse(r io.Reader) ([]record, error) {
	var out []record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		word, js, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || (word != "ROUND" && word != "RATE" && word != "HANG") {
			continue
		}
		rec := record{Word: word}
		if err := json.Unmarshal([]byte(js), &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

func report(files []string, w io.Writer) error {
	if len(files) == 0 {
		return fmt.Errorf("no input files")
	}
	var recs []record
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		rs, err := parse(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		recs = append(recs, rs...)
	}
	_, err := io.WriteString(w, summarize(recs))
	return err
}

// median of ns values (mean of the middle two for an even count).
func median(xs []int64) int64 {
	return quantile(xs, 0.5)
}

func quantile(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if q == 0.5 && len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[int(float64(len(s)-1)*q+0.5)]
}

func ms(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) }

// breakdownCols are the dynrt steps in the order they normally happen.
var breakdownCols = []struct{ key, head string }{
	{"m_announced", "announced (master)"},
	{"r0_announced", "request returned"},
	{"r0_psetop", "UNION done"},
	{"m_started", "all started (master)"},
	{"new_main", "new: main"},
	{"new_init", "new: session"},
	{"new_open", "new: endpoint"},
	{"m_accepted", "accepted (master)"},
	{"m_confirmed", "confirmed (master)"},
	{"new_confirm", "new: confirmed"},
	{"r0_accepted", "rank 0: accept done"},
	{"new_comm", "new: comm"},
	{"r0_comm", "rank 0: comm"},
	{"r0_barrier", "barrier done"},
}

// summarize renders the tables: latency medians per k against every peer
// (each implementation other than dynrt) with the ratio, the rates, and the
// dynrt breakdown per k (medians of ms since the request).
func summarize(recs []record) string {
	lat := map[string]map[int][]int64{}
	hangs := map[string]map[int]int{}
	rates := map[string][]float64{}
	rateN := map[string]int{}
	rateHangs := map[string]int{}
	steps := map[int]map[string][]int64{}
	var ks []int
	var impls []string
	see := func(impl string, k int) {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
		if !slices.Contains(impls, impl) {
			impls = append(impls, impl)
		}
		if lat[impl] == nil {
			lat[impl], hangs[impl] = map[int][]int64{}, map[int]int{}
		}
	}
	for _, r := range recs {
		switch r.Word {
		case "ROUND":
			see(r.Impl, r.K)
			lat[r.Impl][r.K] = append(lat[r.Impl][r.K], r.NS)
			if r.Impl == "dynrt" {
				if steps[r.K] == nil {
					steps[r.K] = map[string][]int64{}
				}
				for name, v := range r.Steps {
					steps[r.K][name] = append(steps[r.K][name], v)
				}
			}
		case "RATE":
			if !slices.Contains(impls, r.Impl) {
				impls = append(impls, r.Impl)
			}
			if r.NS > 0 {
				rates[r.Impl] = append(rates[r.Impl], float64(r.N)/(float64(r.NS)/1e9))
				rateN[r.Impl] = r.N
			}
		case "HANG":
			if r.K == 0 { // in the rate run
				rateHangs[r.Impl]++
				continue
			}
			see(r.Impl, r.K)
			hangs[r.Impl][r.K]++
		}
	}
	slices.Sort(ks)
	// dynrt first, then the peers in name order.
	slices.SortFunc(impls, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "dynrt":
			return -1
		case b == "dynrt":
			return 1
		}
		return strings.Compare(a, b)
	})
	cell := func(xs []int64) (string, string) {
		if len(xs) == 0 {
			return "–", "–"
		}
		return ms(median(xs)), ms(quantile(xs, 0.1)) + "–" + ms(quantile(xs, 0.9))
	}
	var b strings.Builder
	b.WriteString("| k | peer | dynrt median ms | peer median ms | dynrt / peer | dynrt p10–p90 ms | peer p10–p90 ms | rounds dynrt / peer | peer runs killed (hung) |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range ks {
		d := lat["dynrt"][k]
		dm, dr := cell(d)
		peers := slices.DeleteFunc(slices.Clone(impls), func(s string) bool { return s == "dynrt" })
		if len(peers) == 0 {
			peers = []string{"–"} // dynrt alone
		}
		for _, peer := range peers {
			o := lat[peer][k]
			om, or := cell(o)
			ratio := "–"
			if len(d) > 0 && len(o) > 0 {
				ratio = strconv.FormatFloat(float64(median(d))/float64(median(o)), 'f', 3, 64) +
					" (1/" + strconv.FormatFloat(float64(median(o))/float64(median(d)), 'f', 0, 64) + ")"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %d / %d | %d |\n", k, peer, dm, om, ratio, dr, or, len(d), len(o), hangs[peer][k])
		}
	}
	if len(rates)+len(rateHangs) > 0 {
		b.WriteString("\n| spawn rate | runs | grows per run | median grows/s | min–max grows/s | runs killed (hung) |\n|---|---:|---:|---:|---:|---:|\n")
		for _, impl := range impls {
			rs := rates[impl]
			if len(rs) == 0 {
				if rateHangs[impl] > 0 {
					fmt.Fprintf(&b, "| %s | 0 | – | – | – | %d |\n", impl, rateHangs[impl])
				}
				continue
			}
			s := slices.Clone(rs)
			slices.Sort(s)
			med := s[len(s)/2]
			if len(s)%2 == 0 {
				med = (s[len(s)/2-1] + s[len(s)/2]) / 2
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.1f–%.1f | %d |\n", impl, len(rs), rateN[impl], med, s[0], s[len(s)-1], rateHangs[impl])
		}
	}
	if len(steps) > 0 {
		b.WriteString("\ndynrt grow, median ms since the request:\n\n| k |")
		for _, c := range breakdownCols {
			b.WriteString(" " + c.head + " |")
		}
		b.WriteString("\n|---:|" + strings.Repeat("---:|", len(breakdownCols)) + "\n")
		for _, k := range ks {
			if steps[k] == nil {
				continue
			}
			fmt.Fprintf(&b, "| %d |", k)
			for _, c := range breakdownCols {
				if xs := steps[k][c.key]; len(xs) > 0 {
					b.WriteString(" " + ms(median(xs)) + " |")
				} else {
					b.WriteString(" – |")
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}
