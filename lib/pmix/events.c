//go:build pmix

#include "glue.h"
#include "events.h"
#include "_cgo_export.h"

pmix_status_t dyn_notify(pmix_status_t code, const char *nspace, uint32_t rank, pmix_info_t *info,
                         size_t ninfo)
{
    pmix_proc_t src;

    PMIX_PROC_CONSTRUCT(&src);
    PMIX_LOAD_PROCID(&src, nspace, rank);
    return PMIx_Notify_event(code, &src, PMIX_RANGE_CUSTOM, info, ninfo, NULL, NULL);
}

pmix_status_t dyn_notify_event_fn(pmix_status_t code, const pmix_proc_t *source,
                                  pmix_data_range_t range, pmix_info_t info[], size_t ninfo,
                                  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
    (void)cbfunc;
    (void)cbdata;
    if (NULL == source) {
        return PMIX_ERR_BAD_PARAM;
    }
    return dynGoNotifyEvent(code, (char *)source->nspace, source->rank, range, info, ninfo);
}

// number reads an integer directive of any integer type.
static int number(const pmix_value_t *v, int *out)
{
    switch (v->type) {
    case PMIX_INT:
        *out = v->data.integer;
        return 1;
    case PMIX_INT32:
        *out = (int)v->data.int32;
        return 1;
    case PMIX_UINT32:
        *out = (int)v->data.uint32;
        return 1;
    case PMIX_INT16:
        *out = v->data.int16;
        return 1;
    case PMIX_UINT16:
        *out = v->data.uint16;
        return 1;
    default:
        return 0;
    }
}

pmix_status_t dyn_job_control_fn(const pmix_proc_t *requestor, const pmix_proc_t targets[],
                                 size_t ntargets, const pmix_info_t directives[], size_t ndirs,
                                 pmix_info_cbfunc_t cbfunc, void *cbdata)
{
    int kill = 0, sig = 0;

    if (NULL == requestor) {
        return PMIX_ERR_BAD_PARAM;
    }
    for (size_t i = 0; i < ndirs; i++) {
        if (PMIX_CHECK_KEY(&directives[i], PMIX_JOB_CTRL_KILL)) {
            kill = PMIX_INFO_TRUE(&directives[i]);
        } else if (PMIX_CHECK_KEY(&directives[i], PMIX_JOB_CTRL_SIGNAL)) {
            if (!number(&directives[i].value, &sig) || sig <= 0 || sig > 64) {
                return PMIX_ERR_BAD_PARAM;
            }
        } else if (PMIX_INFO_IS_REQUIRED(&directives[i])) {
            return PMIX_ERR_NOT_SUPPORTED; // a directive dynrt does not carry out
        }
    }
    if (!kill && 0 == sig) {
        return PMIX_ERR_NOT_SUPPORTED;
    }
    (void)cbfunc; // answered at once (dynGoJobControl)
    (void)cbdata;
    return dynGoJobControl((char *)requestor->nspace, requestor->rank, (pmix_proc_t *)targets,
                           ntargets, kill, sig);
}
