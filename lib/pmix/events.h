// Events and job control (events.c, with their Go side in events.go):
// the server's notifications to its clients, and the host callbacks
// notify_event and job_control.
#ifndef DYNRT_PMIX_EVENTS_H
#define DYNRT_PMIX_EVENTS_H

#include <stdint.h>
#include <pmix_server.h>

// Notifies the clients the info's PMIX_EVENT_CUSTOM_RANGE names of an
// event (range PMIX_RANGE_CUSTOM). libpmix copies info before it returns.
pmix_status_t dyn_notify(pmix_status_t code, const char *nspace, uint32_t rank, pmix_info_t *info,
                         size_t ninfo);

pmix_status_t dyn_notify_event_fn(pmix_status_t code, const pmix_proc_t *source,
                                  pmix_data_range_t range, pmix_info_t info[], size_t ninfo,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata);
pmix_status_t dyn_job_control_fn(const pmix_proc_t *requestor, const pmix_proc_t targets[],
                                 size_t ntargets, const pmix_info_t directives[], size_t ndirs,
                                 pmix_info_cbfunc_t cbfunc, void *cbdata);

#endif
