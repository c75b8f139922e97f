/* session.c: errors, session init/finalize, identity, abort. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static const struct {
    int code;
    const char *wire, *text;
} codes[] = {
    {DYNRT_OK, "", "success"},
    {DYNRT_ERR_INVALID, "invalid", "invalid argument or request"},
    {DYNRT_ERR_NOT_FOUND, "not_found", "not found"},
    {DYNRT_ERR_EXISTS, "exists", "already exists"},
    {DYNRT_ERR_BUSY, "busy", "busy: another operation is in flight"},
    {DYNRT_ERR_NO_RESOURCES, "no_resources", "not enough resources"},
    {DYNRT_ERR_BAD_STATE, "bad_state", "illegal state"},
    {DYNRT_ERR_TIMEOUT, "timeout", "timed out"},
    {DYNRT_ERR_CANCELED, "canceled", "canceled"},
    {DYNRT_ERR_ABORTED, "aborted", "aborted"},
    {DYNRT_ERR_UNAUTHORIZED, "unauthorized", "unauthorized"},
    {DYNRT_ERR_VERSION, "version", "no common protocol version"},
    {DYNRT_ERR_TOO_LARGE, "too_large", "too large"},
    {DYNRT_ERR_MALFORMED, "malformed", "malformed message"},
    {DYNRT_ERR_UNKNOWN_KIND, "unknown_kind", "unknown message kind"},
    {DYNRT_ERR_CLOSED, "closed", "connection closed"},
    {DYNRT_ERR_UNSUPPORTED, "unsupported", "unsupported"},
    {DYNRT_ERR_INTERNAL, "internal", "internal error"},
    {DYNRT_ERR_PERMISSION, "permission", "permission denied"},
    {DYNRT_ERR_LIMIT, "limit", "limit exceeded"},
    {DYNRT_ERR_NO_RUNTIME, "", "the process was not started by dynrun"},
    {DYNRT_ERR_SYSTEM, "", "system call failed"},
    {DYNRT_ERR_NOMEM, "", "out of memory"},
    {DYNRT_ERR_UNKNOWN, "", "unknown error code"},
};

#define NCODES (sizeof codes / sizeof codes[0])

const char *dynrt_strerror(int code) {
    for (size_t i = 0; i < NCODES; i++) {
        if (codes[i].code == code) {
            return codes[i].text;
        }
    }
    return "unknown error code";
}

const char *dynrt_code_name(int code) {
    for (size_t i = 0; i < NCODES; i++) {
        if (codes[i].code == code) {
            return codes[i].wire;
        }
    }
    return "";
}

int code_of_wire(const char *name, size_t len) {
    for (size_t i = 1; i < NCODES; i++) {
        if (codes[i].wire[0] && strlen(codes[i].wire) == len && memcmp(codes[i].wire, name, len) == 0) {
            return codes[i].code;
        }
    }
    return DYNRT_ERR_UNKNOWN;
}

static _Thread_local struct {
    int code;
    char msg[512];
} tls_err;

void tls_seterr(int code, const char *msg) {
    tls_err.code = code;
    snprintf(tls_err.msg, sizeof tls_err.msg, "%s", msg);
}

int tls_code(void) { return tls_err.code; }

const char *dynrt_errmsg(void) { return tls_err.msg; }

int seterr(dynrt_session *s, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tls_seterr(code, msg);
    if (s != NULL) {
        pthread_mutex_lock(&s->mu);
        s->lastcode = code;
        snprintf(s->lasterr, sizeof s->lasterr, "%s", msg);
        pthread_mutex_unlock(&s->mu);
    }
    return code;
}

int dynrt_last_error(dynrt_session *s, char *buf, size_t len) {
    if (s == NULL || buf == NULL || len == 0) {
        return DYNRT_ERR_INVALID;
    }
    pthread_mutex_lock(&s->mu);
    snprintf(buf, len, "%s", s->lasterr);
    int code = s->lastcode;
    pthread_mutex_unlock(&s->mu);
    return code;
}

int check_session(dynrt_session *s) {
    if (s == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "no session (NULL)");
    }
    return DYNRT_OK;
}

int copy_str(dynrt_session *s, char *buf, size_t len, const char *v, const char *what) {
    if (buf == NULL || strlen(v) + 1 > len) {
        return seterr(s, DYNRT_ERR_TOO_LARGE, "%s %s needs a buffer of %zu bytes, got %zu", what, v, strlen(v) + 1,
                      buf == NULL ? (size_t)0 : len);
    }
    memcpy(buf, v, strlen(v) + 1);
    return DYNRT_OK;
}

/* session.init: the identity and the job's size; again (first == 0) the
 * size as the daemon's data shows it, after a change in flight ("latest",
 * as Session.JobInfo). */
static int session_info(dynrt_session *s, int first, uint32_t *size) {
    req r;
    req_begin(s, &r, "session.init", 1);
    msgpack_pack_map(&r.pk, first ? 3 : 4);
    pk_kstr(&r.pk, "j", s->job);
    pk_kuint(&r.pk, "r", s->rank);
    pk_kint(&r.pk, "pid", getpid());
    if (!first) {
        pk_kbool(&r.pk, "latest", 1);
    }
    dmsg *m;
    int rc = req_call(s, &r, &m);
    if (rc != DYNRT_OK) {
        return rc;
    }
    const msgpack_object *b = m->body;
    *size = (uint32_t)mp_u64(mp_get(b, "sz"));
    if (first) {
        s->uid = mp_u64(mp_get(b, "uid"));
        if (mp_strcpy(mp_get(b, "app"), s->app, sizeof s->app) || mp_strcpy(mp_get(b, "node"), s->node, sizeof s->node) ||
            mp_strcpy(mp_get(b, "dvm"), s->dvm, sizeof s->dvm) ||
            mp_strcpy(mp_get(b, "delta"), s->delta, sizeof s->delta)) {
            rc = seterr(s, DYNRT_ERR_MALFORMED, "session.init: a name in the answer is too long or not a string");
        }
    }
    dmsg_free(m);
    return rc;
}

int dynrt_init(dynrt_session **out) {
    if (out == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_init: no place for the session (NULL)");
    }
    *out = NULL;
    const char *names[] = {"DYNRT_DAEMON", "DYNRT_JOB", "DYNRT_RANK"};
    const char *vals[3];
    for (int i = 0; i < 3; i++) {
        vals[i] = getenv(names[i]);
        if (vals[i] == NULL || vals[i][0] == 0) {
            return seterr(NULL, DYNRT_ERR_NO_RUNTIME, "dynrt_init: %s is not set: the process was not started by dynrun",
                          names[i]);
        }
    }
    char *end;
    errno = 0;
    unsigned long rank = strtoul(vals[2], &end, 10);
    if (errno != 0 || *end != 0 || end == vals[2] || rank > UINT32_MAX) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_init: DYNRT_RANK=%s is not a rank", vals[2]);
    }
    if (strlen(vals[1]) >= DYNRT_NAME_MAX) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_init: DYNRT_JOB is longer than %d bytes", DYNRT_NAME_MAX - 1);
    }
    dynrt_session *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return seterr(NULL, DYNRT_ERR_NOMEM, "dynrt_init: out of memory");
    }
    s->fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->evcv, NULL);
    strcpy(s->job, vals[1]);
    s->rank = (uint32_t)rank;
    const char *token = getenv("DYNRT_TOKEN");
    int rc = conn_open(s, vals[0], token != NULL ? token : "");
    if (rc == DYNRT_OK) {
        rc = session_info(s, 1, &s->size);
    }
    if (rc != DYNRT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "dynrt_init: %s", dynrt_errmsg());
        conn_close(s);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->wmu);
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->evcv);
        free(s);
        tls_seterr(rc, msg);
        return rc;
    }
    *out = s;
    return DYNRT_OK;
}

int dynrt_finalize(dynrt_session *s) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "session.fin", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "j", s->job);
    pk_kuint(&r.pk, "r", s->rank);
    rc = req_call(s, &r, NULL);
    pthread_mutex_lock(&s->mu);
    s->finalizing = 1;
    pthread_mutex_unlock(&s->mu);
    conn_close(s);
    events_stop(s);
    for (pending *p = s->pend, *n; p != NULL; p = n) {
        n = p->next;
        dmsg_free(p->reply);
        free(p);
    }
    for (kvnode *k = s->staged, *n; k != NULL; k = n) {
        n = k->next;
        free(k->key);
        free(k->val);
        free(k);
    }
    for (int i = 0; i < s->npsets; i++) {
        free(s->psets[i]);
    }
    free(s->psets);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->evcv);
    free(s);
    return rc;
}

int dynrt_abort(dynrt_session *s, int code, const char *msg) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "session.abort", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kint(&r.pk, "status", code);
    pk_kstr(&r.pk, "msg", msg);
    return req_call(s, &r, NULL);
}

const char *dynrt_job(const dynrt_session *s) { return s->job; }
const char *dynrt_app(const dynrt_session *s) { return s->app; }
const char *dynrt_node(const dynrt_session *s) { return s->node; }
const char *dynrt_dvm(const dynrt_session *s) { return s->dvm; }
const char *dynrt_launch_delta(const dynrt_session *s) { return s->delta; }
uint32_t dynrt_rank(const dynrt_session *s) { return s->rank; }
uint64_t dynrt_uid(const dynrt_session *s) { return s->uid; }

uint32_t dynrt_size(const dynrt_session *s) { return s->size; }

int dynrt_job_size(dynrt_session *s, uint32_t *size) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (size == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_job_size: no place for the size (NULL)");
    }
    return session_info(s, 0, size);
}
