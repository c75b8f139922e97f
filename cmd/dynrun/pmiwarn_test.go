package main

import (
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/mpidetect"
	"github.com/dynrt/dynrt/wire"
)

// TestPMIMismatch: an explicit --pmi mode gets a warning exactly when the
// program's MPI cannot use it (Open MPI under fd, port or none; MPICH
// under pmix or none); auto, fd+pmix, and programs of no or unknown MPI
// get none.
func TestPMIMismatch(t *testing.T) {
	ompi := mpidetect.Verdict{Need: mpidetect.PMIx, Why: "links libmpi.so.40 (Open MPI)"}
	mpich := mpidetect.Verdict{Need: mpidetect.PMI, Why: "links libmpich.so.12 (MPICH ABI)"}
	none := mpidetect.Verdict{Need: mpidetect.None, Why: "links no MPI library"}
	unknown := mpidetect.Verdict{Need: mpidetect.Unknown, Why: "a script (#!/bin/sh)"}
	for _, tc := range []struct {
		mode string
		v    mpidetect.Verdict
		want string // the fix the warning names; "" = no warning
	}{
		{wire.PMIFD, ompi, "--pmi pmix"},
		{wire.PMIPort, ompi, "--pmi pmix"},
		{wire.PMINone, ompi, "--pmi pmix"},
		{wire.PMIPMIx, ompi, ""},
		{wire.PMIBoth, ompi, ""},
		{wire.PMIAuto, ompi, ""},
		{wire.PMIPMIx, mpich, "--pmi fd or --pmi port"},
		{wire.PMINone, mpich, "--pmi fd or --pmi port"},
		{wire.PMIFD, mpich, ""},
		{wire.PMIPort, mpich, ""},
		{wire.PMIBoth, mpich, ""},
		{wire.PMIPMIx, none, ""},
		{wire.PMIFD, none, ""},
		{wire.PMIPMIx, unknown, ""},
		{wire.PMIFD, unknown, ""},
	} {
		got := pmiMismatch(tc.mode, "./prog", tc.v)
		if tc.want == "" {
			if got != "" {
				t.Errorf("--pmi %s, %s: warning %q, want none", tc.mode, tc.v.Why, got)
			}
			continue
		}
		for _, part := range []string{"dynrun: warning: ./prog " + tc.v.Why, "with --pmi " + tc.mode + " ", "singleton", "--pmi auto", tc.want} {
			if !strings.Contains(got, part) {
				t.Errorf("--pmi %s, %s: warning %q lacks %q", tc.mode, tc.v.Why, got, part)
			}
		}
		if strings.Contains(got, "\n") {
			t.Errorf("--pmi %s: warning %q is not one line", tc.mode, got)
		}
	}
}

// TestPMIMismatchWarning: dynrun --pmi fd of an Open MPI program says so,
// once, on stderr, and runs it anyway (two singletons, exit 0); --pmi fd
// of an MPICH program says nothing.
func TestPMIMismatchWarning(t *testing.T) {
	compile := helloBuilder(t.TempDir())
	for _, tc := range []struct {
		cc, size string
		warn     bool
	}{
		{"mpicc.openmpi", "size=1", true},
		{"mpicc.mpich", "size=2", false},
	} {
		t.Run(tc.cc, func(t *testing.T) {
			prog := compile(t, tc.cc)
			dynDir(t)
			code, out, errOut := run("-n", "2", "--slots", "2", "--pmi", "fd", prog)
			if code != 0 || strings.Count(out, "hello rank=") != 2 || strings.Count(out, tc.size) != 2 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and two hello lines with %s", code, out, errOut, tc.size)
			}
			var warnings []string
			for l := range strings.Lines(errOut) {
				if strings.HasPrefix(l, "dynrun: warning:") {
					warnings = append(warnings, l)
				}
			}
			switch {
			case !tc.warn && len(warnings) != 0:
				t.Errorf("warnings %q, want none", warnings)
			case tc.warn && (len(warnings) != 1 || !strings.Contains(warnings[0], prog+" links libmpi.so.40 (Open MPI), which speaks PMIx only: with --pmi fd")):
				t.Errorf("stderr %q: want one warning naming %s, Open MPI and --pmi fd", errOut, prog)
			}
		})
	}
}
