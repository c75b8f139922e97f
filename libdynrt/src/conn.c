/* conn.c: the connection to the node daemon (docs/wire.md): frames of a
 * 4-byte big-endian length and one msgpack envelope, the hello handshake,
 * odd request ids (we dial), and one reader thread that hands each reply to
 * the caller waiting for its id and each event to the event queues. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

void dmsg_free(dmsg *m) {
    if (m == NULL) {
        return;
    }
    msgpack_unpacked_destroy(&m->up);
    free(m->buf);
    free(m);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads one frame and decodes its envelope; NULL at the end of the stream
 * (errno kept) or on a frame we cannot read (*bad set). */
static dmsg *read_frame(int fd, size_t limit, int *bad) {
    unsigned char h[4];
    *bad = 0;
    if (read_all(fd, (char *)h, 4) < 0) {
        return NULL;
    }
    size_t len = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
    if (len > limit) {
        *bad = 1;
        return NULL;
    }
    dmsg *m = calloc(1, sizeof *m);
    char *buf = malloc(len > 0 ? len : 1);
    if (m == NULL || buf == NULL) {
        free(m);
        free(buf);
        *bad = 1;
        return NULL;
    }
    m->buf = buf;
    m->len = len;
    msgpack_unpacked_init(&m->up);
    if (read_all(fd, buf, len) < 0) {
        dmsg_free(m);
        return NULL;
    }
    size_t off = 0;
    if (msgpack_unpack_next(&m->up, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        m->up.data.type != MSGPACK_OBJECT_MAP) {
        dmsg_free(m);
        *bad = 1;
        return NULL;
    }
    m->body = mp_get(&m->up.data, "body");
    return m;
}

static int send_frame(dynrt_session *s, msgpack_sbuffer *sb) {
    size_t n = sb->size - 4;
    unsigned char *h = (unsigned char *)sb->data;
    h[0] = (unsigned char)(n >> 24);
    h[1] = (unsigned char)(n >> 16);
    h[2] = (unsigned char)(n >> 8);
    h[3] = (unsigned char)n;
    pthread_mutex_lock(&s->wmu);
    int rc = write_all(s->fd, sb->data, sb->size);
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

/* Starts a frame: room for the length, then an envelope map of n keys
 * with v and id. */
static void frame_begin(msgpack_sbuffer *sb, msgpack_packer *pk, size_t n, uint64_t id) {
    msgpack_sbuffer_init(sb);
    msgpack_sbuffer_write(sb, "\0\0\0\0", 4);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(pk, n);
    pk_kuint(pk, "v", PROTO_VERSION);
    pk_kuint(pk, "id", id);
}

int wire_error(dynrt_session *s, const msgpack_object *err, const char *what) {
    const msgpack_object *c = mp_get(err, "code");
    int code = c != NULL && c->type == MSGPACK_OBJECT_STR ? code_of_wire(c->via.str.ptr, c->via.str.size)
                                                          : DYNRT_ERR_UNKNOWN;
    char *text = mp_strdup(mp_get(err, "msg"));
    int rc = seterr(s, code, "%s: %s", what, text != NULL && text[0] ? text : dynrt_strerror(code));
    free(text);
    return rc;
}

/* Answers a request of the daemon: we serve none (docs/wire.md, "Writing a
 * client", step 4). */
static void refuse(dynrt_session *s, uint64_t id, const msgpack_object *kind) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    frame_begin(&sb, &pk, 4, id);
    pk_str(&pk, "kind");
    if (kind != NULL && kind->type == MSGPACK_OBJECT_STR) {
        msgpack_pack_str(&pk, kind->via.str.size);
        msgpack_pack_str_body(&pk, kind->via.str.ptr, kind->via.str.size);
    } else {
        pk_str(&pk, "");
    }
    pk_str(&pk, "err");
    msgpack_pack_map(&pk, 2);
    pk_kstr(&pk, "code", "unknown_kind");
    pk_kstr(&pk, "msg", "libdynrt serves no requests");
    send_frame(s, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static void *reader_main(void *arg) {
    dynrt_session *s = arg;
    for (;;) {
        int bad;
        dmsg *m = read_frame(s->fd, MAX_FRAME, &bad);
        if (m == NULL) {
            /* A frame we cannot read has lost the stream's framing too. */
            pthread_mutex_lock(&s->mu);
            s->closed = 1;
            snprintf(s->closed_why, sizeof s->closed_why, "%s",
                     bad ? "the daemon sent a frame this library cannot read"
                         : (s->finalizing ? "the session is finalized" : "the daemon closed the connection"));
            pthread_cond_broadcast(&s->cv);
            pthread_cond_broadcast(&s->evcv);
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        uint64_t id = mp_u64(mp_get(&m->up.data, "id"));
        const msgpack_object *kind = mp_get(&m->up.data, "kind");
        if (id == 0) {
            if (mp_streq(kind, "event")) {
                event_deliver(s, m->body);
            }
            dmsg_free(m);
            continue;
        }
        if (id % 2 == 0) {
            refuse(s, id, kind);
            dmsg_free(m);
            continue;
        }
        pthread_mutex_lock(&s->mu);
        pending **pp = &s->pend;
        while (*pp != NULL && (*pp)->id != id) {
            pp = &(*pp)->next;
        }
        pending *p = *pp;
        if (p != NULL && p->gone) {
            *pp = p->next;
            free(p);
            p = NULL;
        }
        if (p != NULL && p->reply == NULL) {
            p->reply = m;
            m = NULL;
            pthread_cond_broadcast(&s->cv);
        }
        pthread_mutex_unlock(&s->mu);
        dmsg_free(m); /* a reply nobody waits for */
    }
}

int req_begin(dynrt_session *s, req *r, const char *kind, int has_body) {
    pthread_mutex_lock(&s->mu);
    r->id = s->next_id;
    s->next_id += 2;
    pthread_mutex_unlock(&s->mu);
    r->kind = kind;
    frame_begin(&r->sb, &r->pk, has_body ? 4 : 3, r->id);
    pk_kstr(&r->pk, "kind", kind);
    if (has_body) {
        pk_str(&r->pk, "body");
    }
    return DYNRT_OK;
}

int req_send(dynrt_session *s, req *r, pending **out) {
    pending *p = calloc(1, sizeof *p);
    if (p == NULL) {
        msgpack_sbuffer_destroy(&r->sb);
        return seterr(s, DYNRT_ERR_NOMEM, "%s: out of memory", r->kind);
    }
    p->id = r->id;
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        char why[256];
        snprintf(why, sizeof why, "%s", s->closed_why);
        pthread_mutex_unlock(&s->mu);
        free(p);
        msgpack_sbuffer_destroy(&r->sb);
        return seterr(s, DYNRT_ERR_CLOSED, "%s: %s", r->kind, why);
    }
    p->next = s->pend;
    s->pend = p;
    pthread_mutex_unlock(&s->mu);
    int w = send_frame(s, &r->sb);
    int e = errno;
    msgpack_sbuffer_destroy(&r->sb);
    if (w < 0) {
        req_abandon(s, p);
        return seterr(s, DYNRT_ERR_CLOSED, "%s: write to the daemon: %s", r->kind, strerror(e));
    }
    *out = p;
    return DYNRT_OK;
}

/* Unlinks p; the caller frees it. s->mu held. */
static void unlink_pending(dynrt_session *s, pending *p) {
    for (pending **pp = &s->pend; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

void req_abandon(dynrt_session *s, pending *p) {
    pthread_mutex_lock(&s->mu);
    if (p->reply != NULL || s->closed) {
        unlink_pending(s, p);
        dmsg_free(p->reply);
        free(p);
    } else {
        p->gone = 1; /* the reader frees it with its reply */
    }
    pthread_mutex_unlock(&s->mu);
}

int req_wait(dynrt_session *s, pending *p, const char *kind, dmsg **reply) {
    pthread_mutex_lock(&s->mu);
    while (p->reply == NULL && !s->closed) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    unlink_pending(s, p);
    dmsg *m = p->reply;
    char why[256];
    snprintf(why, sizeof why, "%s", s->closed_why);
    pthread_mutex_unlock(&s->mu);
    free(p);
    if (m == NULL) {
        return seterr(s, DYNRT_ERR_CLOSED, "%s: %s", kind, why);
    }
    const msgpack_object *err = mp_get(&m->up.data, "err");
    if (err != NULL) {
        int rc = wire_error(s, err, kind);
        dmsg_free(m);
        return rc;
    }
    if (reply != NULL) {
        *reply = m;
    } else {
        dmsg_free(m);
    }
    return DYNRT_OK;
}

int req_call(dynrt_session *s, req *r, dmsg **reply) {
    pending *p;
    int rc = req_send(s, r, &p);
    if (rc != DYNRT_OK) {
        return rc;
    }
    return req_wait(s, p, r->kind, reply);
}

/* The handshake: our hello (id 1), its reply, before anything else. */
static int hello(dynrt_session *s, const char *token) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    frame_begin(&sb, &pk, 4, 1);
    pk_kstr(&pk, "kind", "hello");
    pk_str(&pk, "body");
    msgpack_pack_map(&pk, 6);
    pk_kuint(&pk, "min", PROTO_VERSION);
    pk_kuint(&pk, "max", PROTO_VERSION);
    pk_kstr(&pk, "role", "client");
    char name[2 * DYNRT_NAME_MAX];
    snprintf(name, sizeof name, "%s/%u", s->job, s->rank);
    pk_kstr(&pk, "name", name);
    pk_kstr(&pk, "token", token);
    pk_kint(&pk, "pid", getpid());
    int w = send_frame(s, &sb);
    msgpack_sbuffer_destroy(&sb);
    if (w < 0) {
        return seterr(s, DYNRT_ERR_CLOSED, "hello: write to the daemon: %s", strerror(errno));
    }
    /* Before the handshake a body is at most 4 KiB (docs/limits.md). */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int bad;
    dmsg *m = read_frame(s->fd, 4096, &bad);
    tv.tv_sec = 0;
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (m == NULL) {
        if (!bad && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return seterr(s, DYNRT_ERR_TIMEOUT, "hello: the daemon did not answer within 5 s");
        }
        return seterr(s, DYNRT_ERR_CLOSED, "hello: the daemon closed the connection without an answer");
    }
    const msgpack_object *err = mp_get(&m->up.data, "err");
    int rc = DYNRT_OK;
    if (err != NULL) {
        rc = wire_error(s, err, "hello");
    } else if (mp_u64(mp_get(&m->up.data, "id")) != 1) {
        rc = seterr(s, DYNRT_ERR_MALFORMED, "hello: the answer has id %llu, not 1",
                    (unsigned long long)mp_u64(mp_get(&m->up.data, "id")));
    }
    dmsg_free(m);
    return rc;
}

int conn_open(dynrt_session *s, const char *path, const char *token) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) {
        return seterr(s, DYNRT_ERR_INVALID, "connect to the daemon: socket path %s is too long", path);
    }
    strcpy(a.sun_path, path);
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        return seterr(s, DYNRT_ERR_SYSTEM, "socket: %s", strerror(errno));
    }
    if (connect(s->fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(s->fd);
        s->fd = -1;
        return seterr(s, DYNRT_ERR_CLOSED, "connect to the daemon at %s: %s", path, strerror(e));
    }
    int rc = hello(s, token);
    if (rc != DYNRT_OK) {
        close(s->fd);
        s->fd = -1;
        return rc;
    }
    s->next_id = 3;
    if (pthread_create(&s->reader, NULL, reader_main, s) != 0) {
        close(s->fd);
        s->fd = -1;
        return seterr(s, DYNRT_ERR_SYSTEM, "start the reader thread: %s", strerror(errno));
    }
    return DYNRT_OK;
}

void conn_close(dynrt_session *s) {
    if (s->fd < 0) {
        return;
    }
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->reader, NULL);
    close(s->fd);
    s->fd = -1;
}
