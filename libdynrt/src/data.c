/* data.c: process sets, set operations, key-value data, fences, publish
 * and lookup: one request to the daemon each (docs/wire.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int dynrt_pset_ref_format(const dynrt_pset_ref *r, char *buf, size_t len) {
    if (r == NULL || buf == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_pset_ref_format: NULL argument");
    }
    int n = snprintf(buf, len, "%s@%u", r->name, r->version);
    if (n < 0 || (size_t)n >= len) {
        return seterr(NULL, DYNRT_ERR_TOO_LARGE, "dynrt_pset_ref_format: %s@%u needs %d bytes, got %zu", r->name,
                      r->version, n + 1, len);
    }
    return DYNRT_OK;
}

int dynrt_pset_ref_parse(const char *text, dynrt_pset_ref *r) {
    if (text == NULL || r == NULL) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_pset_ref_parse: NULL argument");
    }
    memset(r, 0, sizeof *r);
    const char *at = strrchr(text, '@');
    size_t nl = at != NULL ? (size_t)(at - text) : strlen(text);
    if (nl == 0 || nl >= sizeof r->name) {
        return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_pset_ref_parse: %s: %s", text,
                      nl == 0 ? "no set name" : "name too long");
    }
    if (at != NULL) {
        char *end;
        unsigned long v = strtoul(at + 1, &end, 10);
        if (at[1] < '0' || at[1] > '9' || *end != 0 || v > UINT32_MAX) {
            return seterr(NULL, DYNRT_ERR_INVALID, "dynrt_pset_ref_parse: %s: the version after @ is not a number",
                          text);
        }
        r->version = (uint32_t)v;
    }
    memcpy(r->name, text, nl);
    return DYNRT_OK;
}

int dynrt_app_set(const dynrt_session *s, char *buf, size_t len) {
    int n = snprintf(buf, len, "mpi://app/%s", s->app);
    if (n < 0 || (size_t)n >= len) {
        return seterr(NULL, DYNRT_ERR_TOO_LARGE, "dynrt_app_set: the name needs %d bytes, got %zu", n + 1, len);
    }
    return DYNRT_OK;
}

int dynrt_pset_count(dynrt_session *s, int *n) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "pset.list", 1);
    msgpack_pack_map(&r.pk, 0);
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    const msgpack_object *l = mp_get(m->body, "s");
    size_t k = l != NULL && l->type == MSGPACK_OBJECT_ARRAY ? l->via.array.size : 0;
    char **names = calloc(k + 1, sizeof *names);
    if (names == NULL) {
        dmsg_free(m);
        return seterr(s, DYNRT_ERR_NOMEM, "pset.list: out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        names[i] = mp_strdup(mp_get(&l->via.array.ptr[i], "n"));
    }
    dmsg_free(m);
    pthread_mutex_lock(&s->mu);
    char **old = s->psets;
    int nold = s->npsets;
    s->psets = names;
    s->npsets = (int)k;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < nold; i++) {
        free(old[i]);
    }
    free(old);
    if (n != NULL) {
        *n = (int)k;
    }
    return DYNRT_OK;
}

int dynrt_pset_name(dynrt_session *s, int n, char *buf, size_t len) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    int have = s->psets != NULL;
    pthread_mutex_unlock(&s->mu);
    if (!have && (rc = dynrt_pset_count(s, NULL)) != DYNRT_OK) {
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    if (n < 0 || n >= s->npsets) {
        int k = s->npsets;
        pthread_mutex_unlock(&s->mu);
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_pset_name: no process set number %d (there are %d)", n, k);
    }
    char name[DYNRT_NAME_MAX];
    snprintf(name, sizeof name, "%s", s->psets[n]);
    pthread_mutex_unlock(&s->mu);
    return copy_str(s, buf, len, name, "dynrt_pset_name: set");
}

void dynrt_pset_free(dynrt_pset *p) {
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->nhints; i++) {
        free(p->hint_keys[i]);
        free(p->hint_values[i]);
    }
    free(p->hint_keys);
    free(p->hint_values);
    free(p->members);
    free(p);
}

int dynrt_pset_contains(const dynrt_pset *p, uint32_t rank) {
    size_t lo = 0, hi = p->size;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->members[mid] == rank) {
            return 1;
        }
        if (p->members[mid] < rank) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

static int pset_of(const msgpack_object *o, dynrt_pset **out) {
    dynrt_pset *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return DYNRT_ERR_NOMEM;
    }
    int rc = mp_strcpy(mp_get(o, "n"), p->name, sizeof p->name);
    if (rc == DYNRT_OK) {
        rc = mp_strcpy(mp_get(o, "j"), p->job, sizeof p->job);
    }
    p->version = (uint32_t)mp_u64(mp_get(o, "ver"));
    p->epoch = (uint32_t)mp_u64(mp_get(o, "ep"));
    p->active = mp_bool(mp_get(o, "act"));
    p->defined_ns = mp_i64(mp_get(o, "t"));
    size_t n = 0;
    if (rc == DYNRT_OK) {
        rc = mp_ranks(mp_get(o, "m"), &p->members, &n);
    }
    p->size = (uint32_t)n;
    const msgpack_object *h = mp_get(o, "h");
    if (rc == DYNRT_OK && h != NULL && h->type == MSGPACK_OBJECT_MAP && h->via.map.size > 0) {
        p->hint_keys = calloc(h->via.map.size, sizeof(char *));
        p->hint_values = calloc(h->via.map.size, sizeof(char *));
        if (p->hint_keys == NULL || p->hint_values == NULL) {
            rc = DYNRT_ERR_NOMEM;
        }
        for (uint32_t i = 0; rc == DYNRT_OK && i < h->via.map.size; i++) {
            p->hint_keys[i] = mp_strdup(&h->via.map.ptr[i].key);
            p->hint_values[i] = mp_strdup(&h->via.map.ptr[i].val);
            p->nhints++;
        }
    }
    if (rc != DYNRT_OK) {
        dynrt_pset_free(p);
        return rc;
    }
    *out = p;
    return DYNRT_OK;
}

int dynrt_pset_info(dynrt_session *s, const char *name, dynrt_pset **out) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (name == NULL || out == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_pset_info: NULL argument");
    }
    *out = NULL;
    req r;
    req_begin(s, &r, "pset.get", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "n", name);
    pk_kbool(&r.pk, "m", 1);
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    rc = pset_of(m->body, out);
    dmsg_free(m);
    if (rc != DYNRT_OK) {
        return seterr(s, rc, "pset.get %s: the answer cannot be read: %s", name, dynrt_strerror(rc));
    }
    return DYNRT_OK;
}

static const char *op_name(dynrt_op op) {
    switch (op) {
    case DYNRT_UNION:
        return "union";
    case DYNRT_DIFFERENCE:
        return "difference";
    case DYNRT_INTERSECTION:
        return "intersection";
    }
    return NULL;
}

int dynrt_pset_op(dynrt_session *s, dynrt_op op, const char *p1, const char *p2, const char *target,
                  dynrt_pset_result *out) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    const char *name = op_name(op);
    if (name == NULL || p1 == NULL || p2 == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_pset_op: %s", name == NULL ? "unknown operation (want DYNRT_UNION, DYNRT_DIFFERENCE or DYNRT_INTERSECTION)" : "NULL operand");
    }
    req r;
    req_begin(s, &r, "pset.op", 1);
    msgpack_pack_map(&r.pk, target != NULL ? 4 : 3);
    pk_kstr(&r.pk, "op", name);
    pk_kstr(&r.pk, "p1", p1);
    pk_kstr(&r.pk, "p2", p2);
    if (target != NULL) {
        pk_kstr(&r.pk, "t", target);
    }
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    if (out != NULL) {
        out->size = (uint32_t)mp_u64(mp_get(m->body, "sz"));
        if (mp_ref(m->body, &out->set) != DYNRT_OK) {
            rc = seterr(s, DYNRT_ERR_MALFORMED, "pset.op: the result's name cannot be read");
        }
    }
    dmsg_free(m);
    return rc;
}

int dynrt_pset_split(dynrt_session *s, const char *set, const dynrt_split_opts *o, dynrt_pset_result **out,
                     size_t *nparts) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (set == NULL || o == NULL || out == NULL || nparts == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_pset_split: NULL argument");
    }
    int modes = (o->parts > 0) + (o->by_node != 0) + (o->nlists > 0);
    if (modes != 1) {
        return seterr(s, DYNRT_ERR_INVALID,
                      "dynrt_pset_split %s: set exactly one of parts, by_node and nlists (%d set)", set, modes);
    }
    req r;
    req_begin(s, &r, "pset.op", 1);
    msgpack_pack_map(&r.pk, 4 + (o->target != NULL));
    pk_kstr(&r.pk, "op", "split");
    pk_kstr(&r.pk, "p1", set);
    if (o->target != NULL) {
        pk_kstr(&r.pk, "t", o->target);
    }
    if (o->parts > 0) {
        pk_kstr(&r.pk, "sm", "parts");
        pk_kuint(&r.pk, "k", o->parts);
    } else if (o->by_node) {
        pk_kstr(&r.pk, "sm", "node");
        pk_kuint(&r.pk, "k", 0);
    } else {
        pk_kstr(&r.pk, "sm", "ranks");
        pk_str(&r.pk, "rl");
        msgpack_pack_array(&r.pk, o->nlists);
        for (size_t i = 0; i < o->nlists; i++) {
            pk_ranks(&r.pk, o->lists[i], o->list_sizes[i]);
        }
    }
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    const msgpack_object *parts = mp_get(m->body, "parts");
    size_t k = parts != NULL && parts->type == MSGPACK_OBJECT_ARRAY ? parts->via.array.size : 0;
    dynrt_pset_result *res = calloc(k + 1, sizeof *res);
    if (res == NULL) {
        dmsg_free(m);
        return seterr(s, DYNRT_ERR_NOMEM, "pset.op split: out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        const msgpack_object *p = &parts->via.array.ptr[i];
        mp_ref(p, &res[i].set);
        res[i].size = (uint32_t)mp_u64(mp_get(p, "sz"));
    }
    dmsg_free(m);
    *out = res;
    *nparts = k;
    return DYNRT_OK;
}

int dynrt_pset_delete(dynrt_session *s, const char *name) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "pset.delete", 1);
    msgpack_pack_map(&r.pk, 1);
    pk_kstr(&r.pk, "n", name);
    return req_call(s, &r, NULL);
}

/* Key-value data: staged here until commit, as lib/session does. */

int dynrt_put(dynrt_session *s, const char *key, const void *value, size_t len) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (key == NULL || key[0] == 0 || (value == NULL && len > 0)) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_put: %s", key == NULL || key[0] == 0 ? "empty key" : "NULL value");
    }
    void *v = malloc(len > 0 ? len : 1);
    if (v == NULL) {
        return seterr(s, DYNRT_ERR_NOMEM, "dynrt_put: out of memory");
    }
    if (len > 0) {
        memcpy(v, value, len);
    }
    pthread_mutex_lock(&s->mu);
    kvnode *k = s->staged;
    while (k != NULL && strcmp(k->key, key) != 0) {
        k = k->next;
    }
    if (k == NULL) {
        k = calloc(1, sizeof *k);
        char *kc = strdup(key);
        if (k == NULL || kc == NULL) {
            pthread_mutex_unlock(&s->mu);
            free(k);
            free(kc);
            free(v);
            return seterr(s, DYNRT_ERR_NOMEM, "dynrt_put: out of memory");
        }
        k->key = kc;
        k->next = s->staged;
        s->staged = k;
    }
    free(k->val);
    k->val = v;
    k->len = len;
    pthread_mutex_unlock(&s->mu);
    return DYNRT_OK;
}

int dynrt_commit(dynrt_session *s) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    kvnode *staged = s->staged;
    s->staged = NULL;
    pthread_mutex_unlock(&s->mu);
    size_t n = 0;
    for (kvnode *k = staged; k != NULL; k = k->next) {
        n++;
    }
    req r;
    req_begin(s, &r, "kv.commit", 1);
    msgpack_pack_map(&r.pk, 1);
    pk_str(&r.pk, "d");
    msgpack_pack_array(&r.pk, n);
    for (kvnode *k = staged; k != NULL; k = k->next) {
        msgpack_pack_map(&r.pk, 2);
        pk_kstr(&r.pk, "k", k->key);
        pk_kbin(&r.pk, "v", k->val, k->len);
    }
    rc = req_call(s, &r, NULL);
    if (rc != DYNRT_OK) {
        /* Put back what was not sent, unless put again meanwhile. */
        pthread_mutex_lock(&s->mu);
        for (kvnode *k = staged, *next; k != NULL; k = next) {
            next = k->next;
            kvnode *x = s->staged;
            while (x != NULL && strcmp(x->key, k->key) != 0) {
                x = x->next;
            }
            if (x == NULL) {
                k->next = s->staged;
                s->staged = k;
            } else {
                free(k->key);
                free(k->val);
                free(k);
            }
        }
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    for (kvnode *k = staged, *next; k != NULL; k = next) {
        next = k->next;
        free(k->key);
        free(k->val);
        free(k);
    }
    return DYNRT_OK;
}

static int take_value(dynrt_session *s, const msgpack_object *v, void **value, size_t *len, const char *what) {
    const char *p = "";
    size_t n = 0;
    if (v != NULL && v->type == MSGPACK_OBJECT_BIN) {
        p = v->via.bin.ptr;
        n = v->via.bin.size;
    } else if (v != NULL && v->type == MSGPACK_OBJECT_STR) {
        p = v->via.str.ptr;
        n = v->via.str.size;
    }
    void *out = malloc(n + 1);
    if (out == NULL) {
        return seterr(s, DYNRT_ERR_NOMEM, "%s: out of memory", what);
    }
    memcpy(out, p, n);
    ((char *)out)[n] = 0; /* so that a text value can be used as a C string */
    *value = out;
    if (len != NULL) {
        *len = n;
    }
    return DYNRT_OK;
}

int dynrt_get(dynrt_session *s, uint32_t rank, const char *key, int flags, int64_t timeout_ms, void **value,
              size_t *len) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (key == NULL || value == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_get: NULL argument");
    }
    req r;
    req_begin(s, &r, "kv.get", 1);
    msgpack_pack_map(&r.pk, 5);
    pk_kuint(&r.pk, "r", rank);
    pk_kstr(&r.pk, "k", key);
    pk_kbool(&r.pk, "w", (flags & DYNRT_GET_WAIT) != 0);
    pk_kint(&r.pk, "tmo", timeout_ms > 0 ? timeout_ms : 0);
    pk_kbool(&r.pk, "rf", (flags & DYNRT_GET_REFRESH) != 0);
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    rc = take_value(s, mp_get(m->body, "v"), value, len, "kv.get");
    dmsg_free(m);
    return rc;
}

int dynrt_fence(dynrt_session *s, const uint32_t *ranks, size_t n, const char *id, int collect,
                int64_t timeout_ms) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (ranks != NULL && n == 0) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_fence: over no processes (pass NULL for every live process)");
    }
    req r;
    req_begin(s, &r, "kv.fence", 1);
    msgpack_pack_map(&r.pk, 3 + (ranks != NULL));
    pk_kstr(&r.pk, "id", id != NULL ? id : "");
    pk_kbool(&r.pk, "c", collect);
    pk_kint(&r.pk, "tmo", timeout_ms > 0 ? timeout_ms : 0);
    if (ranks != NULL) {
        pk_str(&r.pk, "p");
        msgpack_pack_array(&r.pk, 1);
        msgpack_pack_map(&r.pk, 1);
        pk_str(&r.pk, "r");
        pk_ranks(&r.pk, ranks, n);
    }
    return req_call(s, &r, NULL);
}

static const char *range_name(dynrt_range r) { return r == DYNRT_RANGE_DVM ? "dvm" : "job"; }

int dynrt_publish(dynrt_session *s, const char *key, const void *value, size_t len, dynrt_range range) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (key == NULL || key[0] == 0 || (value == NULL && len > 0)) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_publish: empty key or NULL value");
    }
    req r;
    req_begin(s, &r, "pub.publish", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "rng", range_name(range));
    pk_str(&r.pk, "d");
    msgpack_pack_array(&r.pk, 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "k", key);
    pk_kbin(&r.pk, "v", len > 0 ? value : "", len);
    return req_call(s, &r, NULL);
}

int dynrt_lookup(dynrt_session *s, const char *key, dynrt_range range, int wait, int64_t timeout_ms, void **value,
                 size_t *len) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (key == NULL || value == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_lookup: NULL argument");
    }
    req r;
    req_begin(s, &r, "pub.lookup", 1);
    msgpack_pack_map(&r.pk, 4);
    pk_kstr(&r.pk, "rng", range_name(range));
    pk_str(&r.pk, "k");
    msgpack_pack_array(&r.pk, 1);
    pk_str(&r.pk, key);
    pk_kbool(&r.pk, "w", wait);
    pk_kint(&r.pk, "tmo", wait && timeout_ms > 0 ? timeout_ms : 0);
    dmsg *m;
    if ((rc = req_call(s, &r, &m)) != DYNRT_OK) {
        return rc;
    }
    const msgpack_object *d = mp_get(m->body, "d");
    if (d == NULL || d->type != MSGPACK_OBJECT_ARRAY || d->via.array.size != 1) {
        dmsg_free(m);
        return seterr(s, DYNRT_ERR_MALFORMED, "pub.lookup %s: the answer does not hold one value", key);
    }
    rc = take_value(s, mp_get(&d->via.array.ptr[0], "v"), value, len, "pub.lookup");
    dmsg_free(m);
    return rc;
}

int dynrt_unpublish(dynrt_session *s, const char *key, dynrt_range range) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "pub.unpublish", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "rng", range_name(range));
    pk_str(&r.pk, "k");
    msgpack_pack_array(&r.pk, key != NULL ? 1 : 0);
    if (key != NULL) {
        pk_str(&r.pk, key);
    }
    return req_call(s, &r, NULL);
}
