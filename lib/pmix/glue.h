// The C side of the PMIx server glue: the host module's callbacks (which
// hand every request to Go, see server.go) and small helpers Go cannot
// express (calling PMIx's function pointers, macros). Memory: Go owns
// what it allocates with C.CString/C.CBytes and frees it; blobs handed to
// PMIx completion functions are malloc'd and freed by the release
// callback PMIx calls when it is done with them.
#ifndef DYNRT_PMIX_GLUE_H
#define DYNRT_PMIX_GLUE_H

#include <stdint.h>
#include <stdlib.h>
#include <pmix.h>
#include <pmix_server.h>

pmix_status_t dyn_server_init(const char *tmpdir, const char *nspace, uint32_t rank);

// Asynchronous server calls: h is a cgo.Handle, dynGoOpDone(h, status)
// reports the completion (unless the call returned an error or
// PMIX_OPERATION_SUCCEEDED, which means no callback).
pmix_status_t dyn_register_nspace(const char *nspace, int nlocal, pmix_info_t *info, size_t ninfo, uintptr_t h);
void dyn_deregister_nspace(const char *nspace, uintptr_t h);
pmix_status_t dyn_register_client(const char *nspace, uint32_t rank, uint32_t uid, uint32_t gid, uintptr_t h);
void dyn_deregister_client(const char *nspace, uint32_t rank, uintptr_t h);
// dynGoModexDone(h, status, data, size) reports the answer.
pmix_status_t dyn_dmodex_request(const char *nspace, uint32_t rank, uintptr_t h);

// Completions of host callbacks, called from Go.
void dyn_op_complete(pmix_op_cbfunc_t f, pmix_status_t st, void *cbdata);
// data is malloc'd (or NULL); it is PMIx's until it calls the release.
void dyn_modex_complete(pmix_modex_cbfunc_t f, pmix_status_t st, char *data, size_t n, void *cbdata);

// Completes a query with the info array in d (malloc'd, with its
// contents; freed by the release callback libpmix calls), or none.
void dyn_info_complete(pmix_info_cbfunc_t f, pmix_status_t st, pmix_data_array_t *d, void *cbdata);

// Data arrays of n procs or strings (strings copied), for info values.
pmix_data_array_t *dyn_array(size_t n, pmix_data_type_t t);
void dyn_array_free(pmix_data_array_t *d);
void dyn_array_set_proc(pmix_data_array_t *d, size_t i, const char *nspace, uint32_t rank);
void dyn_array_set_string(pmix_data_array_t *d, size_t i, const char *s);

// Helpers for Go.
// The namespace of info[i] if it is a proc, else NULL.
const char *dyn_info_proc_nspace(const pmix_info_t *info, size_t i);
char **dyn_query_keys(const pmix_query_t *q, size_t i);
pmix_info_t *dyn_query_quals(const pmix_query_t *q, size_t i, size_t *n);
const char *dyn_info_key(const pmix_info_t *info, size_t i);
// The value of info[i] if it is a string, else NULL.
const char *dyn_info_string(const pmix_info_t *info, size_t i);
// Frees a NULL-terminated array of malloc'd strings (setup_fork's env).
void dyn_argv_free(char **argv);
pmix_status_t dyn_info_add(void *list, const char *key, const void *value, pmix_data_type_t type);

#endif
