package daemon

// hostsPMIx reports whether this daemon can serve PMIx (Open MPI) jobs; the
// master refuses --pmi pmix, and an Open MPI program under --pmi auto, on
// daemons without (lib/master/pmi_auto.go). No daemon hosts a PMIx server
// yet: the server (lib/pmix, -tags pmix) reports pmix.Available() here.
func hostsPMIx() bool { return false }
