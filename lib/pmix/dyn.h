// The host callbacks of dynamic processes (spawn, connect, disconnect):
// dyn.c, with their Go side in dyn.go. Memory: what PMIx passes in stays
// PMIx's and is copied before the callback returns; strings that
// dyn_info_text returns are malloc'd and freed by the caller.
#ifndef DYNRT_PMIX_DYN_H
#define DYNRT_PMIX_DYN_H

#include <pmix_server.h>

pmix_status_t dyn_spawn_fn(const pmix_proc_t *proc, const pmix_info_t job_info[], size_t ninfo,
                           const pmix_app_t apps[], size_t napps, pmix_spawn_cbfunc_t cbfunc,
                           void *cbdata);
pmix_status_t dyn_connect_fn(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                             size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata);
pmix_status_t dyn_disconnect_fn(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                size_t ninfo, pmix_op_cbfunc_t cbfunc, void *cbdata);

// Completes a spawn with the new namespace ("" on error).
void dyn_spawn_complete(pmix_spawn_cbfunc_t f, pmix_status_t st, const char *nspace, void *cbdata);
// The value of info[i] as text (strings, booleans and integers; NULL for
// other types), malloc'd.
char *dyn_info_text(const pmix_info_t *info, size_t i);

// Packs the value of info[i], whatever its type, into *out (malloc'd,
// *n bytes): how a publish of a value that is not a string is kept.
pmix_status_t dyn_value_pack(const pmix_info_t *info, size_t i, char **out, size_t *n);
// Completes a lookup with n values of keys, owned by nspace:rank: vals[i]
// (lens[i] bytes) is a string, or with packed[i] a dyn_value_pack form.
// Everything is copied; the arrays stay the caller's.
void dyn_lookup_complete_values(pmix_lookup_cbfunc_t f, pmix_status_t st, const char *nspace,
                                uint32_t rank, char **keys, char **vals, size_t *lens, int *packed,
                                size_t n, void *cbdata);

#endif
