/* cachemodel: set-associative caches with least-recently-used replacement, the cache model the
 * osact plugin runs per vCPU when asked (cache=on): an L1 instruction cache, an L1 data cache and
 * a unified L2 behind both, each of a configurable size, associativity and line. */
#ifndef COREPLANE_CACHEMODEL_H
#define COREPLANE_CACHEMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t size;   /* bytes */
    uint32_t assoc;  /* ways per set */
    uint32_t line;   /* bytes, a power of two */
} CacheGeometry;

typedef struct {
    CacheGeometry geometry;
    uint32_t n_sets;      /* a power of two */
    uint32_t line_shift;
    uint64_t *tags;       /* n_sets x assoc: the line number + 1, 0 for an empty way */
    uint64_t *last_used;  /* per way, from `clock`: the least recently used way is replaced */
    uint64_t clock;
} Cache;

/* Parses "SIZE:ASSOC:LINE" (SIZE in bytes with an optional K or M suffix, e.g. 32K:8:64) into `g`;
 * false with the reason in `why` when it is malformed or the sets would not be a power of two. */
bool cachemodel_parse(const char *spec, CacheGeometry *g, char *why, size_t why_len);

/* Allocates an empty cache of geometry `g` (cachemodel_parse's); false when out of memory. */
bool cachemodel_init(Cache *c, CacheGeometry g);

/* Looks the line holding `address` up; true on a hit. A miss fills the line (write-allocate for
 * stores too; write-backs are not modelled), evicting the set's least recently used line. */
bool cachemodel_access(Cache *c, uint64_t address);

#endif
