/* pmixprint.h: how the PMIx test programs print
 * processes and values: members of the caller's own namespace as job:RANK,
 * others as other:RANK, so that output does not depend on the launcher's
 * namespace names. Set me with PMIx_Init first. Used by events.c, psets.c
 * and rc_follow.c. */
#ifndef DYNRT_TEST_PMIXPRINT_H
#define DYNRT_TEST_PMIXPRINT_H

#include <pmix.h>
#include <stdio.h>
#include <string.h>

static pmix_proc_t me;

/* proc prints a member as job:RANK or other:RANK (or *: the wildcard);
 * a namespace named after the caller's own plus a suffix (dynrt's
 * namespace of an ADD, NS.rcN) as job.rcN:RANK. */
static void proc(char *buf, size_t n, const pmix_proc_t *p)
{
    size_t own = strlen(me.nspace);
    const char *where = PMIX_CHECK_NSPACE(p->nspace, me.nspace) ? "job" : "other";
    char ext[PMIX_MAX_NSLEN + 8];

    if (strncmp(p->nspace, me.nspace, own) == 0 && p->nspace[own] == '.') {
        snprintf(ext, sizeof ext, "job%s", p->nspace + own);
        where = ext;
    }
    if (p->rank == PMIX_RANK_WILDCARD)
        snprintf(buf, n, "%s:*", where);
    else
        snprintf(buf, n, "%s:%u", where, p->rank);
}

/* value prints the values psets cares about; others by type. */
static void value(char *buf, size_t n, const pmix_value_t *v)
{
    size_t i, used = 0;
    char one[800];

    switch (v->type) {
    case PMIX_STRING:
        snprintf(buf, n, "%s", v->data.string ? v->data.string : "");
        return;
    case PMIX_SIZE:
        snprintf(buf, n, "%zu", v->data.size);
        return;
    case PMIX_UINT32:
        snprintf(buf, n, "%u", v->data.uint32);
        return;
    case PMIX_INT:
        snprintf(buf, n, "%d", v->data.integer);
        return;
    case PMIX_BOOL:
        snprintf(buf, n, "%s", v->data.flag ? "true" : "false");
        return;
    case PMIX_STATUS:
        snprintf(buf, n, "%s", PMIx_Error_string(v->data.status));
        return;
    case PMIX_PROC:
        proc(buf, n, v->data.proc);
        return;
    case PMIX_PROC_RANK:
        snprintf(buf, n, "%u", v->data.rank);
        return;
    case PMIX_DATA_ARRAY:
        buf[0] = '\0';
        if (v->data.darray == NULL)
            return;
        for (i = 0; i < v->data.darray->size && used + 1 < n; i++) {
            if (v->data.darray->type == PMIX_PROC)
                proc(one, sizeof one, &((pmix_proc_t *)v->data.darray->array)[i]);
            else if (v->data.darray->type == PMIX_STRING)
                snprintf(one, sizeof one, "%s", ((char **)v->data.darray->array)[i]);
            else if (v->data.darray->type == PMIX_INFO) {
                pmix_info_t *in = &((pmix_info_t *)v->data.darray->array)[i];
                char inner[200];
                value(inner, sizeof inner, &in->value);
                snprintf(one, sizeof one, "{%s=%s}", in->key, inner);
            } else
                snprintf(one, sizeof one, "(%s)", PMIx_Data_type_string(v->data.darray->type));
            used += snprintf(buf + used, n - used, "%s%s", i ? "," : "", one);
        }
        return;
    default:
        snprintf(buf, n, "(%s)", PMIx_Data_type_string(v->type));
    }
}

#endif
