/* mp.c: reading and writing the msgpack shapes of docs/wire.md with
 * msgpack-c (Debian's libmsgpack-dev): maps keyed by short strings, absent
 * or nil keys meaning zero, integers of any width, RankRanges. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const msgpack_object *mp_get(const msgpack_object *map, const char *key) {
    if (map == NULL || map->type != MSGPACK_OBJECT_MAP) {
        return NULL;
    }
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == kl &&
            memcmp(kv->key.via.str.ptr, key, kl) == 0) {
            return kv->val.type == MSGPACK_OBJECT_NIL ? NULL : &kv->val;
        }
    }
    return NULL;
}

uint64_t mp_u64(const msgpack_object *o) {
    if (o == NULL) {
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return o->via.u64;
    }
    return 0;
}

int64_t mp_i64(const msgpack_object *o) {
    if (o == NULL) {
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return (int64_t)o->via.u64;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        return o->via.i64;
    }
    return 0;
}

int mp_bool(const msgpack_object *o) { return o != NULL && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean; }

int mp_streq(const msgpack_object *o, const char *s) {
    size_t l = strlen(s);
    if (o == NULL) {
        return l == 0;
    }
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == l && memcmp(o->via.str.ptr, s, l) == 0;
}

/* str or bin: the wire's text and byte fields. */
static int raw_of(const msgpack_object *o, const char **p, size_t *n) {
    if (o == NULL) {
        *p = "";
        *n = 0;
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_STR) {
        *p = o->via.str.ptr;
        *n = o->via.str.size;
        return 1;
    }
    if (o->type == MSGPACK_OBJECT_BIN) {
        *p = o->via.bin.ptr;
        *n = o->via.bin.size;
        return 1;
    }
    return 0;
}

int mp_strcpy(const msgpack_object *o, char *buf, size_t len) {
    const char *p;
    size_t n;
    if (!raw_of(o, &p, &n)) {
        return DYNRT_ERR_MALFORMED;
    }
    if (n + 1 > len) {
        return DYNRT_ERR_TOO_LARGE;
    }
    memcpy(buf, p, n);
    buf[n] = 0;
    return DYNRT_OK;
}

char *mp_strdup(const msgpack_object *o) {
    const char *p;
    size_t n;
    if (!raw_of(o, &p, &n)) {
        p = "";
        n = 0;
    }
    char *s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

int mp_ranks(const msgpack_object *o, uint32_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (o == NULL) {
        return DYNRT_OK;
    }
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        return DYNRT_ERR_MALFORMED;
    }
    size_t total = 0;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *p = &o->via.array.ptr[i];
        if (p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 2) {
            return DYNRT_ERR_MALFORMED;
        }
        uint64_t lo = mp_u64(&p->via.array.ptr[0]), hi = mp_u64(&p->via.array.ptr[1]);
        if (hi < lo || hi > UINT32_MAX) {
            return DYNRT_ERR_MALFORMED;
        }
        total += (size_t)(hi - lo + 1);
    }
    if (total == 0) {
        return DYNRT_OK;
    }
    uint32_t *r = malloc(total * sizeof *r);
    if (r == NULL) {
        return DYNRT_ERR_NOMEM;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < o->via.array.size; i++) {
        const msgpack_object *p = &o->via.array.ptr[i];
        uint64_t lo = mp_u64(&p->via.array.ptr[0]), hi = mp_u64(&p->via.array.ptr[1]);
        for (uint64_t x = lo; x <= hi; x++) {
            r[k++] = (uint32_t)x;
        }
    }
    *out = r;
    *n = total;
    return DYNRT_OK;
}

int mp_ref(const msgpack_object *o, dynrt_pset_ref *r) {
    memset(r, 0, sizeof *r);
    if (o == NULL) {
        return DYNRT_OK;
    }
    r->version = (uint32_t)mp_u64(mp_get(o, "ver"));
    return mp_strcpy(mp_get(o, "n"), r->name, sizeof r->name);
}

void pk_str(msgpack_packer *pk, const char *s) {
    size_t l = strlen(s);
    msgpack_pack_str(pk, l);
    msgpack_pack_str_body(pk, s, l);
}

void pk_kstr(msgpack_packer *pk, const char *k, const char *v) {
    pk_str(pk, k);
    pk_str(pk, v != NULL ? v : "");
}

void pk_kuint(msgpack_packer *pk, const char *k, uint64_t v) {
    pk_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

void pk_kint(msgpack_packer *pk, const char *k, int64_t v) {
    pk_str(pk, k);
    msgpack_pack_int64(pk, v);
}

void pk_kbool(msgpack_packer *pk, const char *k, int v) {
    pk_str(pk, k);
    if (v) {
        msgpack_pack_true(pk);
    } else {
        msgpack_pack_false(pk);
    }
}

void pk_kbin(msgpack_packer *pk, const char *k, const void *v, size_t len) {
    pk_str(pk, k);
    msgpack_pack_bin(pk, len);
    msgpack_pack_bin_body(pk, v, len);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int pk_ranks(msgpack_packer *pk, const uint32_t *ranks, size_t n) {
    uint32_t *r = NULL;
    if (n > 0) {
        r = malloc(n * sizeof *r);
        if (r == NULL) {
            return DYNRT_ERR_NOMEM;
        }
        memcpy(r, ranks, n * sizeof *r);
        qsort(r, n, sizeof *r, cmp_u32);
    }
    size_t pairs = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || r[i] > r[i - 1] + 1) {
            pairs++;
        }
    }
    msgpack_pack_array(pk, pairs);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && r[j + 1] <= r[j] + 1) {
            j++;
        }
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint32(pk, r[i]);
        msgpack_pack_uint32(pk, r[j]);
        i = j + 1;
    }
    free(r);
    return DYNRT_OK;
}
