/* events.c: subscriptions. The daemon sends every event any subscription
 * of the connection asked for; the reader thread matches them against the
 * subscriptions' kind prefixes (each delivered once per subscription) and
 * queues them for dynrt_event_poll or for the event thread, which runs the
 * callbacks in order and outside the reader, so a callback may call the
 * session. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void dynrt_event_free(dynrt_event *ev) {
    if (ev == NULL) {
        return;
    }
    free(ev->kind);
    free(ev->job);
    free(ev->node);
    free(ev->state);
    free(ev->msg);
    free(ev->ranks);
    free(ev->src_job);
    for (size_t i = 0; i < ev->ndata; i++) {
        free(ev->data_keys[i]);
        free(ev->data_values[i]);
    }
    free(ev->data_keys);
    free(ev->data_values);
    free(ev);
}

dynrt_rc_type rc_type_of(const msgpack_object *o) {
    if (mp_streq(o, "ADD")) {
        return DYNRT_RC_ADD;
    }
    if (mp_streq(o, "SUB")) {
        return DYNRT_RC_SUB;
    }
    if (mp_streq(o, "REPLACE")) {
        return DYNRT_RC_REPLACE;
    }
    return DYNRT_RC_NULL;
}

dynrt_rc_status rc_status_of(const msgpack_object *o) {
    static const char *names[] = {"NULL", "ANNOUNCED", "PENDING", "FINALIZED", "ABORTED"};
    for (int i = 1; i < 5; i++) {
        if (mp_streq(o, names[i])) {
            return (dynrt_rc_status)i;
        }
    }
    return DYNRT_RC_STATUS_NULL;
}

static dynrt_event *event_of(const msgpack_object *b, uint64_t sub) {
    dynrt_event *ev = calloc(1, sizeof *ev);
    if (ev == NULL) {
        return NULL;
    }
    ev->sub = sub;
    ev->seq = mp_u64(mp_get(b, "seq"));
    ev->time_ns = mp_i64(mp_get(b, "t"));
    ev->kind = mp_strdup(mp_get(b, "k"));
    ev->job = mp_strdup(mp_get(b, "j"));
    ev->node = mp_strdup(mp_get(b, "n"));
    ev->state = mp_strdup(mp_get(b, "st"));
    ev->msg = mp_strdup(mp_get(b, "msg"));
    ev->code = (int)mp_i64(mp_get(b, "code"));
    ev->signal = (int)mp_i64(mp_get(b, "sig"));
    mp_ranks(mp_get(b, "r"), &ev->ranks, &ev->nranks);
    const msgpack_object *ps = mp_get(b, "ps");
    if (ps != NULL) {
        mp_ref(ps, &ev->pset);
    }
    const msgpack_object *rc = mp_get(b, "rc");
    if (rc != NULL) {
        mp_strcpy(mp_get(rc, "d"), ev->rc_delta, sizeof ev->rc_delta);
        ev->rc_type = rc_type_of(mp_get(rc, "t"));
        ev->rc_status = rc_status_of(mp_get(rc, "st"));
    }
    const msgpack_object *src = mp_get(b, "src");
    if (src != NULL) {
        ev->src_job = mp_strdup(mp_get(src, "j"));
        ev->src_rank = (uint32_t)mp_u64(mp_get(src, "r"));
    }
    const msgpack_object *d = mp_get(b, "d");
    if (d != NULL && d->type == MSGPACK_OBJECT_MAP && d->via.map.size > 0) {
        ev->data_keys = calloc(d->via.map.size, sizeof(char *));
        ev->data_values = calloc(d->via.map.size, sizeof(char *));
        for (uint32_t i = 0; ev->data_keys != NULL && ev->data_values != NULL && i < d->via.map.size; i++) {
            ev->data_keys[i] = mp_strdup(&d->via.map.ptr[i].key);
            ev->data_values[i] = mp_strdup(&d->via.map.ptr[i].val);
            ev->ndata++;
        }
    }
    if (ev->kind == NULL || ev->job == NULL || ev->node == NULL || ev->state == NULL || ev->msg == NULL) {
        dynrt_event_free(ev);
        return NULL;
    }
    return ev;
}

static int sub_matches(const sub *sb, const msgpack_object *kind) {
    if (sb->nkinds == 0) {
        return 1;
    }
    if (kind == NULL || kind->type != MSGPACK_OBJECT_STR) {
        return 0;
    }
    for (size_t i = 0; i < sb->nkinds; i++) {
        size_t l = strlen(sb->kinds[i]);
        if (l <= kind->via.str.size && memcmp(kind->via.str.ptr, sb->kinds[i], l) == 0) {
            return 1;
        }
    }
    return 0;
}

static void enqueue(evqueue *q, evitem *it) {
    if (q->tail != NULL) {
        q->tail->next = it;
    } else {
        q->head = it;
    }
    q->tail = it;
}

static evitem *dequeue(evqueue *q) {
    evitem *it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
    }
    return it;
}

void event_deliver(dynrt_session *s, const msgpack_object *body) {
    const msgpack_object *kind = mp_get(body, "k");
    uint64_t seq = mp_u64(mp_get(body, "seq"));
    pthread_mutex_lock(&s->mu);
    for (sub *sb = s->subs; sb != NULL; sb = sb->next) {
        if (seq <= sb->last || !sub_matches(sb, kind)) {
            continue;
        }
        sb->last = seq;
        evitem *it = calloc(1, sizeof *it);
        if (it == NULL) {
            continue;
        }
        it->ev = event_of(body, sb->id);
        if (it->ev == NULL) {
            free(it);
            continue;
        }
        it->fn = sb->fn;
        it->arg = sb->arg;
        enqueue(sb->fn != NULL ? &s->cbq : &s->pollq, it);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->evcv);
    pthread_mutex_unlock(&s->mu);
}

static void *event_main(void *arg) {
    dynrt_session *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        evitem *it = dequeue(&s->cbq);
        if (it == NULL) {
            if (s->finalizing) {
                break;
            }
            pthread_cond_wait(&s->evcv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        it->fn(s, it->ev, it->arg);
        dynrt_event_free(it->ev);
        free(it);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void sub_free(sub *sb) {
    for (size_t i = 0; i < sb->nkinds; i++) {
        free(sb->kinds[i]);
    }
    free(sb->kinds);
    free(sb);
}

int dynrt_subscribe(dynrt_session *s, const char *const *kinds, size_t nkinds, dynrt_event_fn fn, void *arg,
                    uint64_t *id) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    sub *sb = calloc(1, sizeof *sb);
    if (sb == NULL || (nkinds > 0 && (sb->kinds = calloc(nkinds, sizeof(char *))) == NULL)) {
        free(sb);
        return seterr(s, DYNRT_ERR_NOMEM, "dynrt_subscribe: out of memory");
    }
    for (size_t i = 0; i < nkinds; i++) {
        if ((sb->kinds[i] = strdup(kinds[i])) == NULL) {
            sub_free(sb);
            return seterr(s, DYNRT_ERR_NOMEM, "dynrt_subscribe: out of memory");
        }
        sb->nkinds++;
    }
    sb->fn = fn;
    sb->arg = arg;
    if (fn != NULL) {
        pthread_mutex_lock(&s->mu);
        int start = !s->evthread_on;
        s->evthread_on = 1;
        pthread_mutex_unlock(&s->mu);
        if (start && pthread_create(&s->evthread, NULL, event_main, s) != 0) {
            pthread_mutex_lock(&s->mu);
            s->evthread_on = 0;
            pthread_mutex_unlock(&s->mu);
            sub_free(sb);
            return seterr(s, DYNRT_ERR_SYSTEM, "dynrt_subscribe: start the event thread: %s", strerror(errno));
        }
    }
    /* Listed (with id 0) before the request: an event the daemon sends
     * right after its reply finds it. */
    pthread_mutex_lock(&s->mu);
    sb->next = s->subs;
    s->subs = sb;
    pthread_mutex_unlock(&s->mu);
    req r;
    req_begin(s, &r, "event.sub", 1);
    msgpack_pack_map(&r.pk, 1);
    pk_str(&r.pk, "k");
    msgpack_pack_array(&r.pk, nkinds);
    for (size_t i = 0; i < nkinds; i++) {
        pk_str(&r.pk, kinds[i]);
    }
    dmsg *m;
    rc = req_call(s, &r, &m);
    pthread_mutex_lock(&s->mu);
    if (rc == DYNRT_OK) {
        sb->id = mp_u64(mp_get(m->body, "id"));
    } else {
        for (sub **pp = &s->subs; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == sb) {
                *pp = sb->next;
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != DYNRT_OK) {
        sub_free(sb);
        return rc;
    }
    dmsg_free(m);
    if (id != NULL) {
        *id = sb->id;
    }
    return DYNRT_OK;
}

int dynrt_unsubscribe(dynrt_session *s, uint64_t id) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    for (sub **pp = &s->subs; *pp != NULL;) {
        sub *sb = *pp;
        if (id == 0 || sb->id == id) {
            *pp = sb->next;
            sub_free(sb);
        } else {
            pp = &sb->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
    req r;
    req_begin(s, &r, "event.unsub", 1);
    msgpack_pack_map(&r.pk, 1);
    pk_kuint(&r.pk, "id", id);
    return req_call(s, &r, NULL);
}

int dynrt_event_poll(dynrt_session *s, int timeout_ms, dynrt_event **ev) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    if (ev == NULL) {
        return seterr(s, DYNRT_ERR_INVALID, "dynrt_event_poll: NULL argument");
    }
    *ev = NULL;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_ms > 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&s->mu);
    evitem *it;
    int timedout = 0;
    while ((it = dequeue(&s->pollq)) == NULL && !s->closed && timeout_ms != 0 && !timedout) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else {
            timedout = pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT;
        }
    }
    int closed = s->closed;
    pthread_mutex_unlock(&s->mu);
    if (it == NULL) {
        if (closed) {
            return seterr(s, DYNRT_ERR_CLOSED, "dynrt_event_poll: the connection to the daemon is closed");
        }
        return seterr(s, DYNRT_ERR_TIMEOUT, "dynrt_event_poll: no event within %d ms", timeout_ms);
    }
    *ev = it->ev;
    free(it);
    return DYNRT_OK;
}

int dynrt_notify(dynrt_session *s, const char *msg, const char *const *keys, const char *const *values,
                 size_t n) {
    int rc = check_session(s);
    if (rc != DYNRT_OK) {
        return rc;
    }
    req r;
    req_begin(s, &r, "event.notify", 1);
    msgpack_pack_map(&r.pk, 2);
    pk_kstr(&r.pk, "msg", msg);
    pk_str(&r.pk, "d");
    msgpack_pack_map(&r.pk, n);
    for (size_t i = 0; i < n; i++) {
        pk_kstr(&r.pk, keys[i], values[i]);
    }
    return req_call(s, &r, NULL);
}

/* Ends the event thread and drops what is queued; the reader has ended. */
void events_stop(dynrt_session *s) {
    pthread_mutex_lock(&s->mu);
    s->finalizing = 1;
    int on = s->evthread_on;
    pthread_cond_broadcast(&s->evcv);
    pthread_mutex_unlock(&s->mu);
    if (on) {
        pthread_join(s->evthread, NULL);
    }
    evitem *it;
    while ((it = dequeue(&s->pollq)) != NULL || (it = dequeue(&s->cbq)) != NULL) {
        dynrt_event_free(it->ev);
        free(it);
    }
    for (sub *sb = s->subs, *n; sb != NULL; sb = n) {
        n = sb->next;
        sub_free(sb);
    }
    s->subs = NULL;
}
