package sshe2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHLaunch: what a user meets starting DVMs over ssh on the hosts,
// whose ssh sessions do not find dynrun on their PATH: a clear error
// without --prefix, a clear error when a host cannot be reached, a prefix implied by running dynrun by its absolute
// path, prterun's host lists (the master's host takes no processes unless
// listed), the ssh command from $DYNRT_SSH, and a private DVM over hosts
// from the launch form. Nothing is left on any host after each.
func TestSSHLaunch(t *testing.T) {
	h := startHosts(t)
	bind := h.c.Host("h0").Addr.String() + ":0"

	t.Run("remote dynrun not found", func(t *testing.T) {
		h := h.on(t)
		_, errs, code := h.run("h0", "dynrun", "dvm", "start", "--host", "h0:1,h1:1,h2:1", "--launch-agent", h.agent(),
			"--prefix", "", "--bind", bind, "--daemonize")
		if code != 1 {
			t.Fatalf("dvm start exited %d, want 1; stderr:\n%s", code, errs)
		}
		// The first daemon to fail is reported: h1 or h2, with the
		// remote shell's message and what to do.
		if !strings.Contains(errs, "(host h1)") && !strings.Contains(errs, "(host h2)") ||
			!strings.Contains(errs, "dynrun: command not found") || !strings.Contains(errs, "--prefix") {
			t.Errorf("the report does not name the host, the remote error and --prefix:\n%s", errs)
		}
		h.assertNothingLeft()
	})

	t.Run("host unreachable", func(t *testing.T) {
		h := h.on(t)
		if err := h.c.Cut(t.Context(), "h2"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := h.c.Restore(t.Context(), "h2"); err != nil {
				t.Error(err)
			}
		}()
		_, errs, code := h.run("h0", "dynrun", "dvm", "start", "--host", "h0:1,h1:1,h2:1",
			"--launch-agent", h.agent()+" -o ConnectTimeout=2", "--prefix", progs, "--bind", bind, "--daemonize")
		if code != 1 || !strings.Contains(errs, "(host h2)") || !strings.Contains(errs, "timed out") || !strings.Contains(errs, "ssh -F") {
			t.Errorf("dvm start with h2 unreachable: exit %d, want 1 and a report naming host h2, ssh's error and the ssh command:\n%s", code, errs)
		}
		// h1's daemon, which did start, is gone with the failed start.
		h.assertNothingLeft()
	})

	t.Run("implied prefix and a list without the master's host", func(t *testing.T) {
		h := h.on(t)
		// dynrun run as <prefix>/bin/dynrun implies --prefix <prefix>.
		dynrun := filepath.Join(progs, "bin", "dynrun")
		out := strings.TrimSpace(h.ok("h0", dynrun, "dvm", "start", "--host", "h1:2,h2:2", "--launch-agent", h.agent(),
			"--bind", bind, "--daemonize"))
		dvm := strings.Fields(out)[0]
		st := h.status(dvm)
		if len(st.Nodes) != 3 || st.Nodes[0].Host != "h0" || st.Nodes[0].Slots != 0 {
			t.Errorf("nodes %+v, want node 0 on h0 with 0 slots, then h1 and h2", st.Nodes)
		}
		if got := sortedWords(h.ok("h0", "dynrun", "--dvm", dvm, "-n", "4", "hostname")); got != "h1 h1 h2 h2" {
			t.Errorf("ranks ran on %q, want h1 h1 h2 h2 (h0 is not in the list)", got)
		}
		h.ok("h0", "dynrun", "dvm", "stop", "--dvm", dvm)
		h.assertNothingLeft()
	})

	t.Run("default bind publishes the host's address", func(t *testing.T) {
		h := h.on(t)
		// No --bind: the ssh launcher listens on 0.0.0.0 and must publish
		// an address the hosts can dial (h0's), never 0.0.0.0.
		report := filepath.Join(h.c.Dir(), "report-uri")
		out := strings.TrimSpace(h.ok("h0", "dynrun", "dvm", "start", "--host", "h1:1,h2:1", "--launch-agent", h.agent(),
			"--prefix", progs, "--daemonize", "--report-uri", report))
		dvm := strings.Fields(out)[0]
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		if want := "uri:tcp://" + h.c.Host("h0").Addr.String() + ":"; !strings.Contains(string(b), want) {
			t.Errorf("--report-uri wrote %q, want %s<port>", b, want)
		}
		if got := sortedWords(h.ok("h0", "dynrun", "--dvm", dvm, "-n", "2", "hostname")); got != "h1 h2" {
			t.Errorf("ranks ran on %q, want h1 h2", got)
		}
		h.ok("h0", "dynrun", "dvm", "stop", "--dvm", dvm)
		h.assertNothingLeft()
	})

	t.Run("private DVM over hosts with DYNRT_SSH", func(t *testing.T) {
		h := h.on(t)
		out := h.ok("h0", "env", "DYNRT_SSH="+h.agent(), "DYNRT_PREFIX="+progs,
			"dynrun", "-n", "4", "--host", "h1:2,h2:2", "--bind", bind, "hostname")
		if got := sortedWords(out); got != "h1 h1 h2 h2" {
			t.Errorf("ranks ran on %q, want h1 h1 h2 h2", got)
		}
		h.assertNothingLeft()
	})
}
