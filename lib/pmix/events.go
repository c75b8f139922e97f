//go:build pmix

package pmix

// #include "glue.h"
// #include "events.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Notify sends ev to its targets among this server's clients. The
// server's own identity is the source unless ev names one.
func (s *Server) Notify(ev Event) error {
	if len(ev.Targets) == 0 {
		return errors.New("pmix: an event without targets")
	}
	src := ev.Source
	if src == (Proc{}) {
		src = s.self
	}
	il := newInfoList()
	il.procs(KeyEventRange, ev.Targets)
	il.flag(KeyEventNonDefault, true)
	// Not cached: libpmix would keep the event for processes that register
	// later, and its cache (an eviction timer per event) left later jobs'
	// clients hanging in TestJobControl; a process registers its handler
	// before it asks for events.
	il.flag(keyEventDoNotCache, true)
	if len(ev.Affected) > 0 {
		il.procs(KeyEventAffected, ev.Affected)
	}
	for _, in := range ev.Info {
		il.value(in.Key, in.Value)
	}
	da, err := il.convert()
	if err != nil {
		return fmt.Errorf("pmix: event %d: %w", ev.Status, err)
	}
	defer C.PMIx_Data_array_destruct(&da)
	ns := C.CString(src.Nspace)
	defer C.free(unsafe.Pointer(ns))
	if rc := C.dyn_notify(C.pmix_status_t(ev.Status), ns, C.uint32_t(src.Rank), (*C.pmix_info_t)(da.array), da.size); rc != C.PMIX_SUCCESS {
		return fmt.Errorf("pmix: notify event %d: %w", ev.Status, status(rc))
	}
	return nil
}

//export dynGoNotifyEvent
func dynGoNotifyEvent(code C.pmix_status_t, ns *C.char, rank C.uint32_t, rng C.pmix_data_range_t, info *C.pmix_info_t, n C.size_t) C.pmix_status_t {
	ev := ClientEvent{Status: int(code), Source: cproc(ns, rank), Range: int(rng), Info: goKVs(info, n)}
	h, end := begin(ev.Source.Nspace)
	if r, ok := h.(EventReceiver); ok {
		go func() {
			defer end()
			r.ClientEvent(ev)
		}()
	} else if end != nil {
		end()
	}
	// Acknowledged at once: libpmix answers the client from its own
	// thread then (its completion of a client's event is not safe from
	// another thread).
	return C.PMIX_OPERATION_SUCCEEDED
}

//export dynGoJobControl
func dynGoJobControl(ns *C.char, rank C.uint32_t, targets *C.pmix_proc_t, n C.size_t, kill, sig C.int) C.pmix_status_t {
	p := cproc(ns, rank)
	ts := goProcs(targets, n)
	jc, end, ok := beginAs[JobController](p.Nspace)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	// Accepted at once, as mpirun.openmpi's runtime does: libpmix 4.2
	// answers the client from the completion without moving to its own
	// thread, which is not safe from another thread (and waiting for the
	// answer on libpmix's thread left clients hanging now and then).
	go jc.JobControl(p, ts, JobCtl{Kill: kill != 0, Signal: int(sig)}, end)
	return C.PMIX_OPERATION_SUCCEEDED
}
