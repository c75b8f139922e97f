/* internal.h: what the files of libdynrt share; not installed. */
#ifndef DYNRT_INTERNAL_H
#define DYNRT_INTERNAL_H

#include <msgpack.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include "dynrt.h"

/* The wire protocol version this library speaks (docs/wire.md, Handshake). */
#define PROTO_VERSION 1
/* A body the daemon sends us is at most this large (its own default limit). */
#define MAX_FRAME (16u << 20)

/* A decoded frame: the buffer stays alive as long as the objects, which
 * point into it. */
typedef struct dmsg {
    char *buf;
    size_t len;
    msgpack_unpacked up;
    const msgpack_object *body; /* NULL when absent or nil */
} dmsg;

void dmsg_free(dmsg *m);

/* A request waiting for its reply. */
typedef struct pending {
    uint64_t id;
    dmsg *reply;
    int gone; /* the caller gave up: the reader frees the reply */
    struct pending *next;
} pending;

/* A request being built: the envelope up to the body key is packed by
 * req_begin, the caller packs the body with pk. */
typedef struct req {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    uint64_t id;
    const char *kind;
} req;

typedef struct kvnode {
    char *key;
    void *val;
    size_t len;
    struct kvnode *next;
} kvnode;

typedef struct sub {
    uint64_t id;
    char **kinds;
    size_t nkinds;
    dynrt_event_fn fn;
    void *arg;
    uint64_t last; /* Seq of the last event delivered */
    struct sub *next;
} sub;

typedef struct evitem {
    dynrt_event *ev;
    dynrt_event_fn fn;
    void *arg;
    struct evitem *next;
} evitem;

typedef struct evqueue {
    evitem *head, *tail;
} evqueue;

struct dynrt_session {
    int fd;
    pthread_mutex_t mu;  /* everything below except the identity */
    pthread_cond_t cv;   /* replies, poll events, close */
    pthread_mutex_t wmu; /* whole frames are written under it */
    pthread_t reader;
    int closed;     /* the connection is gone */
    int finalizing; /* dynrt_finalize has begun */
    char closed_why[256];
    uint64_t next_id;
    pending *pend;

    char job[DYNRT_NAME_MAX], app[DYNRT_NAME_MAX], node[DYNRT_NAME_MAX], dvm[DYNRT_NAME_MAX];
    char delta[DYNRT_NAME_MAX];
    uint32_t rank, size;
    uint64_t uid;

    kvnode *staged;
    char **psets;
    int npsets;

    sub *subs;
    evqueue pollq;     /* events for dynrt_event_poll */
    evqueue cbq;       /* events for callbacks */
    pthread_cond_t evcv;
    pthread_t evthread;
    int evthread_on;

    int lastcode;
    char lasterr[512];
};

/* Errors: set the calling thread's and the session's message, return code. */
int seterr(dynrt_session *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int code_of_wire(const char *name, size_t len);
/* The error of an err map ({code, msg}) of the wire, as seterr. */
int wire_error(dynrt_session *s, const msgpack_object *err, const char *what);
void tls_seterr(int code, const char *msg);
int tls_code(void);

/* Connection (conn.c). */
int conn_open(dynrt_session *s, const char *path, const char *token);
void conn_close(dynrt_session *s);
int req_begin(dynrt_session *s, req *r, const char *kind, int has_body);
/* Sends r and waits for the reply: DYNRT_OK with *reply (may be NULL when
 * the caller passes NULL), or the error of the reply. */
int req_call(dynrt_session *s, req *r, dmsg **reply);
int req_send(dynrt_session *s, req *r, pending **p);
int req_wait(dynrt_session *s, pending *p, const char *kind, dmsg **reply);
void req_abandon(dynrt_session *s, pending *p);

/* msgpack helpers (mp.c). */
const msgpack_object *mp_get(const msgpack_object *map, const char *key);
uint64_t mp_u64(const msgpack_object *o);
int64_t mp_i64(const msgpack_object *o);
int mp_bool(const msgpack_object *o);
int mp_streq(const msgpack_object *o, const char *s);
/* Copies a str into buf; DYNRT_ERR_TOO_LARGE if it does not fit. */
int mp_strcpy(const msgpack_object *o, char *buf, size_t len);
char *mp_strdup(const msgpack_object *o);
/* Expands a RankRanges value into a malloc'ed ascending array. */
int mp_ranks(const msgpack_object *o, uint32_t **out, size_t *n);
int mp_ref(const msgpack_object *o, dynrt_pset_ref *r);

void pk_str(msgpack_packer *pk, const char *s);
void pk_kstr(msgpack_packer *pk, const char *k, const char *v);
void pk_kuint(msgpack_packer *pk, const char *k, uint64_t v);
void pk_kint(msgpack_packer *pk, const char *k, int64_t v);
void pk_kbool(msgpack_packer *pk, const char *k, int v);
void pk_kbin(msgpack_packer *pk, const char *k, const void *v, size_t len);
/* Packs ranks (any order, duplicates allowed) as RankRanges. */
int pk_ranks(msgpack_packer *pk, const uint32_t *ranks, size_t n);

/* Shared bits of the API files. */
int check_session(dynrt_session *s);
int copy_str(dynrt_session *s, char *buf, size_t len, const char *v, const char *what);
void event_deliver(dynrt_session *s, const msgpack_object *body);
void events_stop(dynrt_session *s);
dynrt_rc_type rc_type_of(const msgpack_object *o);
dynrt_rc_status rc_status_of(const msgpack_object *o);

#endif
