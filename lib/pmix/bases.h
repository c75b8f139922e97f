// The libevent bases that libpmix made, and the libevent functions used on
// them, looked up at run time (libpmix links libevent; dynrt does not).
#ifndef DYN_BASES_H
#define DYN_BASES_H

struct event_base;
struct event;

typedef int (*dyn_foreach_cb)(const struct event_base *, const struct event *, void *);

struct dyn_libevent {
    int (*foreach_event)(struct event_base *, dyn_foreach_cb, void *);
    void *(*callback_arg)(const struct event *);
    int (*fd_of)(const struct event *);
    short (*events_of)(const struct event *);
    int (*del)(struct event *);
};

#define DYN_EV_READ 0x02 /* libevent's EV_READ */

/* dyn_libevent returns libevent's functions, or NULL if one is missing. */
const struct dyn_libevent *dyn_libevent(void);

/* dyn_each_base calls fn(base, arg) for each live base until fn returns
 * nonzero; no base is freed meanwhile. */
void dyn_each_base(int (*fn)(struct event_base *, void *), void *arg);

#endif
