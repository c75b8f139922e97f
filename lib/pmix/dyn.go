//go:build pmix

package pmix

// #include "glue.h"
// #include "dyn.h"
import "C"

import (
	"strings"
	"sync"
	"unsafe"
)

// The Go side of dyn.c (the types and interfaces are in dynamic.go).

// goKVs copies info keys whose values have a text form (others are
// skipped: nothing dynrt reads has another type).
func goKVs(info *C.pmix_info_t, n C.size_t) []KV {
	var out []KV
	for i := range n {
		v := C.dyn_info_text(info, i)
		if v == nil {
			continue
		}
		out = append(out, KV{Key: C.GoString(C.dyn_info_key(info, i)), Value: C.GoString(v)})
		C.free(unsafe.Pointer(v))
	}
	return out
}

func goApps(apps *C.pmix_app_t, n C.size_t) []App {
	if apps == nil || n == 0 {
		return nil
	}
	out := make([]App, 0, n)
	for _, a := range unsafe.Slice(apps, n) {
		app := App{Argv: goStrings(a.argv), Env: goStrings(a.env), MaxProcs: int(a.maxprocs), Info: goKVs(a.info, a.ninfo)}
		if a.cmd != nil {
			app.Cmd = C.GoString(a.cmd)
		}
		if a.cwd != nil {
			app.Cwd = C.GoString(a.cwd)
		}
		out = append(out, app)
	}
	return out
}

//export dynGoSpawn
func dynGoSpawn(ns *C.char, rank C.uint32_t, info *C.pmix_info_t, ninfo C.size_t, apps *C.pmix_app_t, napps C.size_t, f C.pmix_spawn_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	p := cproc(ns, rank)
	job, as := goKVs(info, ninfo), goApps(apps, napps)
	if len(as) == 0 {
		return C.PMIX_ERR_BAD_PARAM
	}
	sp, end, ok := beginAs[Spawner](p.Nspace)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	var once sync.Once
	done := func(nspace string, err error) {
		once.Do(func() {
			defer end()
			if err != nil {
				nspace = ""
			}
			cs := C.CString(nspace)
			defer C.free(unsafe.Pointer(cs))
			C.dyn_spawn_complete(f, code(err), cs, cbdata)
		})
	}
	go sp.Spawn(p, job, as, done)
	return C.PMIX_SUCCESS
}

//export dynGoConnect
func dynGoConnect(procs *C.pmix_proc_t, n C.size_t, connect C.int, f C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	ps := goProcs(procs, n)
	for _, p := range ps {
		c, end, ok := beginAs[Connector](p.Nspace)
		if !ok {
			continue
		}
		if connect != 0 {
			go c.Connect(ps, opDone(f, cbdata, end))
		} else {
			go c.Disconnect(ps, opDone(f, cbdata, end))
		}
		return C.PMIX_SUCCESS
	}
	return C.PMIX_ERR_NOT_SUPPORTED
}

// packedValue marks a published value that is not a string: the rest is
// dyn_value_pack's form. Strings (MPI port names) stay as they are, so
// that PMI clients of other jobs read them too.
const packedValue = "\x00pmix.value\x00"

// publishValue returns the value of info[i] as the name service keeps
// it.
func publishValue(info *C.pmix_info_t, i C.size_t) (string, error) {
	if v := C.dyn_info_string(info, i); v != nil {
		return C.GoString(v), nil
	}
	var out *C.char
	var n C.size_t
	if rc := C.dyn_value_pack(info, i, &out, &n); rc != C.PMIX_SUCCESS {
		return "", status(rc)
	}
	defer C.free(unsafe.Pointer(out))
	return packedValue + string(C.GoBytes(unsafe.Pointer(out), C.int(n))), nil
}

// completeLookup answers a lookup with values as publishValue kept them.
func completeLookup(f C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer, st C.pmix_status_t, p Proc, keys, vals []string) {
	n := len(keys)
	ns := C.CString(p.Nspace)
	defer C.free(unsafe.Pointer(ns))
	var ka, va **C.char
	var la *C.size_t
	var pa *C.int
	if n > 0 {
		// C arrays: Go memory may not hold C pointers passed to C.
		ka = (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
		va = (**C.char)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
		la = (*C.size_t)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.size_t(0)))))
		pa = (*C.int)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.int(0)))))
		defer func() {
			for i := range n {
				C.free(unsafe.Pointer(unsafe.Slice(ka, n)[i]))
				C.free(unsafe.Pointer(unsafe.Slice(va, n)[i]))
			}
			C.free(unsafe.Pointer(ka))
			C.free(unsafe.Pointer(va))
			C.free(unsafe.Pointer(la))
			C.free(unsafe.Pointer(pa))
		}()
		ks, vs, ls, ps := unsafe.Slice(ka, n), unsafe.Slice(va, n), unsafe.Slice(la, n), unsafe.Slice(pa, n)
		for i := range n {
			v := vals[i]
			if rest, ok := strings.CutPrefix(v, packedValue); ok {
				v, ps[i] = rest, 1
			}
			ks[i] = C.CString(keys[i])
			vs[i] = (*C.char)(C.CBytes(append([]byte(v), 0)))
			ls[i] = C.size_t(len(v))
		}
	}
	C.dyn_lookup_complete_values(f, st, ns, C.uint32_t(p.Rank), ka, va, la, pa, C.size_t(n), cbdata)
}

// proc adds a process (PMIX_PROC) to the list.
func (il *infoList) proc(key string, p Proc) {
	var cp C.pmix_proc_t
	loadProc(&cp, p)
	il.add(key, unsafe.Pointer(&cp), C.PMIX_PROC)
}
