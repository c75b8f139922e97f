/* rc.c: resource changes (thesis listings 6.1, 6.5, 6.6; docs/rc.md):
 * query, request, cancel, accept and confirm, and the request handles of
 * the non-blocking accept and confirm. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *dynrt_rc_type_name(dynrt_rc_type t) {
    switch (t) {
    case DYNRT_RC_ADD:
        return "ADD";
    case DYNRT_RC_SUB:
        return "SUB";
    case DYNRT_RC_REPLACE:
        return "REPLACE";
    case DYNRT_RC_NULL:
        break;
    }
    return "NULL";
}

const char *dynrt_rc_status_name(dynrt_rc_status s) {
    static const char *names[] = {"NULL", "ANNOUNCED", "PENDING", "FINALIZED", "ABORTED"};
    return (unsigned)s < 5 ? names[s] : "NULL";
}

void dynrt_rc_release(dynrt_rc *rc) {
    if (rc == NULL) {
        return;
    }
    free(rc->ranks);
    free(rc->out);
    free(rc->bound);
    memset(rc, 0, sizeof *rc);
}

static int rc_of(const msgpack_object *o, int incl, dynrt_rc *rc) {
    memset(rc, 0, sizeof *rc);
    rc->type = rc_type_of(mp_get(o, "t"));
    rc->status = rc_status_of(mp_get(o, "st"));
    rc->incl = incl;
    rc->n = (uint32_t)mp_u64(mp_get(o, "n"));
    int e = mp_strcpy(mp_get(o, "d"), rc->delta, sizeof rc->delta);
    if (e == DYNRT_OK) {
        e = mp_strcpy(mp_get(o, "os"), rc->out_set, sizeof rc->out_set);
    }
    mp_strcpy(mp_get(o, "by"), rc->requester, sizeof rc->requester);
    /* A reason longer than the field is cut, not an error. */
    const msgpack_object *why = mp_get(o, "why");
    if (why != NULL && why->type == MSGPACK_OBJECT_STR) {
        size_t n = why->via.str.size < sizeof rc->reason - 1 ? why->via.str.size : sizeof rc->reason - 1;
        memcpy(rc->reason, why->via.str.ptr, n);
        rc->reason[n] = 0;
    }
    const msgpack_object *cause = mp_get(o, "cause");
    rc->failure = cause != NULL && mp_streq(mp_get(cause, "k"), "failure");
    const msgpack_object *ts = mp_get(o, "ts");
    rc->times.requested = mp_i64(mp_get(ts, "req"));
    rc->times.announced = mp_i64(mp_get(ts, "ann"));
    rc->times.started = mp_i64(mp_get(ts, "sta"));
    rc->times.accepted = mp_i64(mp_get(ts, "acc"));
    rc->times.confirmed = mp_i64(mp_get(ts, "cnf"));
    rc->times.finalized = mp_i64(mp_get(ts, "fin"));
    rc->times.exited = mp_i64(mp_get(ts, "ext"));
    rc->times.aborted = mp_i64(mp_get(ts, "abt"));
    if (e == DYNRT_OK) {
        e = mp_ranks(mp_get(o, "r"), &rc->ranks, &rc->nranks);
    }
    if (e == DYNRT_OK) {
        e = mp_ranks(mp_get(o, "out"), &rc->out, &rc->nout);
    }
    const msgpack_object *bv = mp_get(o, "bv");
    if (e == DYNRT_OK && bv != NULL && bv->type == MSGPACK_OBJECT_ARRAY && bv->via.array.size > 0) {
        rc->bound = calloc(bv->via.array.size, sizeof *rc->bound);
        if (rc->bound == NULL) {
            e = DYNRT_ERR_NOMEM;
        }
        for (uint32_t i = 0; e == DYNRT_OK && i < bv->via.array.size; i++) {
            e = mp_ref(&bv->via.array.ptr[i], &rc->bound[i]);
            rc->nbound++;
        }
    }
    if (e != DYNRT_OK) {
        dynrt_rc_release(rc);
    }
    return e;
}

/* rc.query to the daemon, which answers from its copy of the records.
 * Without a delta it asks with need: the daemon answers the change only
 * while it still needs the caller (docs/wire.md, RCQueryReq). */
static int query(dynrt_session *s, const char *delta, const char *bound, dynrt_rc *rc) {
    req r;
    req_begin(s, &r, "rc.query", 1);
    if (delta != NULL) {
        msgpack_pack_map(&r.pk, 1);
        pk_kstr(&r.pk, "d", delta);
    } else {
        msgpack_pack_map(&r.pk, 2);
        pk_kstr(&r.pk, "b", bound != NULL ? bound : "");
        pk_kbool(&r.pk, "need", 1);
    }
    dmsg *m;
    int e = req_call(s, &r, &m);
    if (e != DYNRT_OK) {
        return e;
    }
    const msgpack_object *o = mp_get(m->body, "rc");
    if (o == NULL) {
        memset(rc, 0, sizeof *rc);
    } else if ((e = rc_of(o, mp_bool(mp_get(m->body, "incl")), rc)) != DYNRT_OK) {
        e = seterr(s, e, "rc.query: the record cannot be read: %s", dynrt_strerror(e));
    }
    dmsg_free(m);
    return e;
}

int dynrt_rc_get(dynrt_session *s, const char *delta, dynrt_rc *rc) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL || rc == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_rc_get: NULL argument");
    }
    return query(s, delta, NULL, rc);
}

int dynrt_rc_query(dynrt_session *s, const char *bound, dynrt_rc *rc) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (rc == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_rc_query: NULL argument");
    }
    /* The daemon applies the rule (need): one request, the same answer as
     * every other client's. */
    return query(s, NULL, bound != NULL ? bound : DYNRT_SELF, rc);
}

int dynrt_rc_request(dynrt_session *s, dynrt_rc_type type, uint32_t n, const dynrt_rc_request_opts *o,
                     dynrt_rc *rc) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (type != DYNRT_RC_ADD && type != DYNRT_RC_SUB && type != DYNRT_RC_REPLACE) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_rc_request: type %d is not DYNRT_RC_ADD, _SUB or _REPLACE", type);
    }
    dynrt_rc_request_opts none = {0};
    if (o == NULL) {
        o = &none;
    }
    req r;
    req_begin(s, &r, "rc.request", 1);
    msgpack_pack_map(&r.pk, 7 + (o->nranks > 0) + (o->bound != NULL));
    pk_kstr(&r.pk, "t", dynrt_rc_type_name(type));
    pk_kuint(&r.pk, "n", n);
    pk_kbool(&r.pk, "w", o->wait);
    pk_kint(&r.pk, "tmo", 0);
    pk_kbool(&r.pk, "q", o->queue);
    pk_kint(&r.pk, "grace", o->grace_ms);
    pk_kint(&r.pk, "cto", o->confirm_timeout_ms);
    if (o->nranks > 0) {
        pk_str(&r.pk, "r");
        pk_ranks(&r.pk, o->ranks, o->nranks);
    }
    if (o->bound != NULL) {
        pk_str(&r.pk, "b");
        msgpack_pack_array(&r.pk, 1);
        pk_str(&r.pk, o->bound);
    }
    dmsg *m;
    if ((e = req_call(s, &r, &m)) != DYNRT_OK) {
        return e;
    }
    if (rc != NULL && (e = rc_of(m->body, 0, rc)) != DYNRT_OK) {
        e = seterr(s, e, "rc.request: the record cannot be read: %s", dynrt_strerror(e));
    }
    dmsg_free(m);
    return e;
}

int dynrt_rc_cancel(dynrt_session *s, const char *delta, const char *why) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_rc_cancel: no delta set (NULL)");
    }
    req r;
    req_begin(s, &r, "rc.cancel", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "d", delta);
    pk_kstr(&r.pk, "why", why != NULL ? why : "");
    return req_call(s, &r, NULL);
}

/* Phase 3. */

static int accept_reply_of(const msgpack_object *o, dynrt_accept_result *res) {
    memset(res, 0, sizeof *res);
    res->status = rc_status_of(mp_get(o, "st"));
    res->terminate = mp_bool(mp_get(o, "term"));
    return mp_ref(mp_get(o, "set"), &res->set);
}

/* Phase 3 in the member form (docs/wire.md, "Phase 3"): one rc.accept per
 * call and one rc.confirm; the daemon fences the members (or the new
 * processes), forwards the root's (the lowest new process's) request and
 * answers every caller with the decision, terminate set for it. The
 * record is queried first for the delta's canonical name. The daemon
 * notes the caller's part for rc.query's need. */
int dynrt_accept(dynrt_session *s, const char *delta, const char *new_set, const dynrt_accept_opts *o,
                 dynrt_accept_result *res) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL || res == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_accept: NULL argument");
    }
    dynrt_accept_opts none = {0};
    if (o == NULL) {
        o = &none;
    }
    memset(res, 0, sizeof *res);
    dynrt_rc rc;
    if ((e = query(s, delta, NULL, &rc)) != DYNRT_OK) {
        return e;
    }
    req r;
    req_begin(s, &r, "rc.accept", 1);
    msgpack_pack_map(&r.pk, 3 + (o->bound != NULL) + (o->has_root != 0) + (new_set != NULL));
    pk_kstr(&r.pk, "d", rc.delta[0] != 0 ? rc.delta : delta);
    pk_kbool(&r.pk, "blk", o->blocking);
    pk_kint(&r.pk, "tmo", o->timeout_ms > 0 ? o->timeout_ms : 0);
    if (o->bound != NULL) {
        pk_kstr(&r.pk, "b", o->bound);
    }
    if (o->has_root) {
        pk_kuint(&r.pk, "root", o->root);
    }
    if (new_set != NULL) {
        pk_str(&r.pk, "set");
        msgpack_pack_map(&r.pk, 1);
        pk_kstr(&r.pk, "n", new_set);
    }
    dmsg *m;
    if ((e = req_call(s, &r, &m)) == DYNRT_OK) {
        e = accept_reply_of(m->body, res);
        dmsg_free(m);
    }
    dynrt_rc_release(&rc);
    return e;
}

int dynrt_confirm(dynrt_session *s, const char *delta, int64_t timeout_ms, dynrt_pset_ref *set) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL || set == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_confirm: NULL argument");
    }
    req r;
    req_begin(s, &r, "rc.confirm", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "d", delta);
    pk_kint(&r.pk, "tmo", timeout_ms > 0 ? timeout_ms : 0);
    dmsg *m;
    if ((e = req_call(s, &r, &m)) != DYNRT_OK) {
        return e;
    }
    e = mp_ref(mp_get(m->body, "set"), set);
    dmsg_free(m);
    return e;
}

/* Non-blocking accept and confirm: the call runs on a thread of its own
 * (each blocks only on its own replies, so other calls go on meanwhile). */
struct dynrt_request {
    dynrt_session *s;
    pthread_t thread;
    atomic_int done;
    int confirm;
    char *delta, *new_set, *bound;
    dynrt_accept_opts opts;
    int64_t timeout_ms;
    int rc;
    char msg[512];
    dynrt_accept_result res;
};

static void request_free(dynrt_request *r) {
    free(r->delta);
    free(r->new_set);
    free(r->bound);
    free(r);
}

static void *request_main(void *arg) {
    dynrt_request *r = arg;
    if (r->confirm) {
        r->rc = dynrt_confirm(r->s, r->delta, r->timeout_ms, &r->res.set);
        if (r->rc == DYNRT_OK) {
            r->res.status = DYNRT_RC_FINALIZED;
        }
    } else {
        r->rc = dynrt_accept(r->s, r->delta, r->new_set, &r->opts, &r->res);
    }
    if (r->rc != DYNRT_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", dynrt_errmsg());
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static char *dup_or_null(const char *v, int *fail) {
    if (v == NULL) {
        return NULL;
    }
    char *d = strdup(v);
    if (d == NULL) {
        *fail = 1;
    }
    return d;
}

static int request_start(dynrt_session *s, dynrt_request *r, dynrt_request **out) {
    r->s = s;
    if (pthread_create(&r->thread, NULL, request_main, r) != 0) {
        int e = errno;
        request_free(r);
        return seterr(s, DYNRT_ERR_SYSTEM, "start a request thread: %s", strerror(e));
    }
    *out = r;
    return DYNRT_OK;
}

int dynrt_iaccept(dynrt_session *s, const char *delta, const char *new_set, const dynrt_accept_opts *o,
                  dynrt_request **req) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL || req == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_iaccept: NULL argument");
    }
    dynrt_request *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return seterr(s, DYNRT_ERR_NOMEM, "dynrt_iaccept: out of memory");
    }
    int fail = 0;
    r->delta = dup_or_null(delta, &fail);
    r->new_set = dup_or_null(new_set, &fail);
    if (o != NULL) {
        r->opts = *o;
        r->bound = dup_or_null(o->bound, &fail);
        r->opts.bound = r->bound;
    }
    if (fail) {
        request_free(r);
        return seterr(s, DYNRT_ERR_NOMEM, "dynrt_iaccept: out of memory");
    }
    return request_start(s, r, req);
}

int dynrt_iconfirm(dynrt_session *s, const char *delta, int64_t timeout_ms, dynrt_request **req) {
    int e = check_session(s);
    if (e != DYNRT_OK) {
        return e;
    }
    if (delta == NULL || req == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_iconfirm: NULL argument");
    }
    dynrt_request *r = calloc(1, sizeof *r);
    int fail = r == NULL;
    if (r != NULL) {
        r->confirm = 1;
        r->timeout_ms = timeout_ms;
        r->delta = dup_or_null(delta, &fail);
    }
    if (fail) {
        if (r != NULL) {
            request_free(r);
        }
        return seterr(s, DYNRT_ERR_NOMEM, "dynrt_iconfirm: out of memory");
    }
    return request_start(s, r, req);
}

static int request_end(dynrt_request **req, dynrt_accept_result *res) {
    dynrt_request *r = *req;
    pthread_join(r->thread, NULL);
    int e = r->rc;
    if (res != NULL) {
        *res = r->res;
    }
    if (e != DYNRT_OK) {
        seterr(r->s, e, "%s", r->msg);
    }
    request_free(r);
    *req = NULL;
    return e;
}

int dynrt_test(dynrt_request **req, int *done, dynrt_accept_result *res) {
    if (req == NULL || *req == NULL || done == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_test: no request (NULL)");
    }
    *done = atomic_load(&(*req)->done);
    if (!*done) {
        return DYNRT_OK;
    }
    return request_end(req, res);
}

int dynrt_wait(dynrt_request **req, dynrt_accept_result *res) {
    if (req == NULL || *req == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_wait: no request (NULL)");
    }
    return request_end(req, res);
}
