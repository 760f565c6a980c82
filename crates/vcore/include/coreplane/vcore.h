/* coreplane/vcore.h: the vcore API of many-core processes (libcoreplane-vcore.so).
 * A program attaches to the arbiter, asks for vcores, yields them at safe points, and learns of
 * grants and coming preemptions from its read-only procinfo page and per-vcore queues. */
#ifndef COREPLANE_VCORE_H
#define COREPLANE_VCORE_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CP_MAX_VCORES 64
/* The environment variable that names the arbiter's socket, and the socket by default. */
#define CP_ARBITER_SOCKET_ENV "COREPLANE_ARBITER_SOCKET"
#define CP_ARBITER_SOCKET_DEFAULT "/run/coreplane/arbiter.sock"
enum { CP_VCORE_FREE = 0, CP_VCORE_HELD = 1, CP_VCORE_PREEMPT_PENDING = 2 };
enum { CP_EV_GRANTED = 1, CP_EV_PREEMPT_PENDING = 2, CP_EV_PREEMPTED = 3, CP_EV_RELEASED = 4 };

struct cp_vcore_info { int32_t cpu; uint32_t state; uint64_t deadline_ns; };

/* Read-only; written by the arbiter. Deadlines are CLOCK_MONOTONIC nanoseconds. */
struct cp_procinfo {
    uint32_t magic, pid, compute_cores, provisioned, max_vcores, held, free_cores;
    uint32_t generation;   /* bumped and woken (a shared futex) at every change of the above */
    uint64_t dropped;      /* notifications lost because a queue was left full */
    uint64_t preemptions;  /* vcores taken at their deadline */
    struct cp_vcore_info vcores[CP_MAX_VCORES];
};

int cp_vcore_open(void);                 /* attach ($COREPLANE_ARBITER_SOCKET), waiting up to
                                            $COREPLANE_VCORE_ATTACH_MS (5000) for the provision; 0 or -1 */
int cp_vcore_open_wait(int wait_ms);     /* the same, waiting up to wait_ms (0: not at all) */
void cp_vcore_close(void);
int cp_vcore_request(int n);             /* vcores granted now, or -1 */
int cp_vcore_yield(int vcore);           /* 0 or -1 */
int cp_vcore_id(void);                   /* the caller's vcore (by its CPU), or -1 */
int cp_vcore_cpu(int vcore);             /* the CPU of a held vcore, or -1 */
int cp_vcore_preempt_pending(int vcore, uint64_t *deadline_ns);   /* 1 or 0 */
int cp_vcore_next_event(int vcore, uint32_t *kind, uint64_t *arg); /* 1 or 0 (empty) */
const struct cp_procinfo *cp_vcore_procinfo(void);
const char *cp_vcore_error(void);        /* the calling thread's last error */

#ifdef __cplusplus
}
#endif
#endif
