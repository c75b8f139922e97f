package daemon

import "github.com/dynrt/dynrt/lib/pmix"

// hostsPMIx reports whether this daemon can serve PMIx (Open MPI) jobs: a
// dynrun built with PMIx support (lib/pmix, -tags pmix). The master
// refuses --pmi pmix, and an Open MPI program under --pmi auto, on daemons
// without (lib/master/pmi_auto.go).
func hostsPMIx() bool { return pmix.Available() }
