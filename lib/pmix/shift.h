// Running a completion on libpmix's progress thread (shift.c).
#ifndef DYN_SHIFT_H
#define DYN_SHIFT_H

/* dyn_shift_init finds libpmix's progress thread; call it once the
 * server runs. 0 if it cannot be found (dyn_shift then runs fn at once). */
int dyn_shift_init(void);

/* dyn_shift runs fn(arg) on libpmix's progress thread, soon. */
void dyn_shift(void (*fn)(void *), void *arg);

/* Bookkeeping for the tests: a host callback notes its thread (libpmix's
 * progress thread), a completion counts itself and whether it ran on
 * another thread. */
void dyn_note_host_thread(void);
void dyn_count_completion(void);
void dyn_completions(long *all, long *elsewhere);

#endif
