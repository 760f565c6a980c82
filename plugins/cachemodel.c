/* cachemodel: set-associative LRU caches for the osact plugin (cachemodel.h). */
#include "cachemodel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static bool power_of_two(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

bool cachemodel_parse(const char *spec, CacheGeometry *g, char *why, size_t why_len)
{
    char *end;
    errno = 0;
    unsigned long long size = strtoull(spec, &end, 10);
    if (*end == 'K' || *end == 'k') {
        size <<= 10;
        end++;
    } else if (*end == 'M' || *end == 'm') {
        size <<= 20;
        end++;
    }
    unsigned long assoc = 0, line = 0;
    if (errno != 0 || *end != ':' || sscanf(end, ":%lu:%lu", &assoc, &line) != 2) {
        snprintf(why, why_len, "%s is not SIZE:ASSOC:LINE (e.g. 32K:8:64)", spec);
        return false;
    }
    if (assoc == 0 || !power_of_two(line) || size % ((uint64_t)assoc * line) != 0 ||
        !power_of_two(size / ((uint64_t)assoc * line))) {
        snprintf(why, why_len, "%s: the line must be a power of two and SIZE / (ASSOC x LINE) sets a power of two",
                 spec);
        return false;
    }
    *g = (CacheGeometry){.size = size, .assoc = (uint32_t)assoc, .line = (uint32_t)line};
    return true;
}

bool cachemodel_init(Cache *c, CacheGeometry g)
{
    *c = (Cache){.geometry = g, .n_sets = (uint32_t)(g.size / ((uint64_t)g.assoc * g.line))};
    while ((1u << c->line_shift) < g.line) {
        c->line_shift++;
    }
    size_t ways = (size_t)c->n_sets * g.assoc;
    c->tags = calloc(ways, sizeof *c->tags);
    c->last_used = calloc(ways, sizeof *c->last_used);
    return c->tags != NULL && c->last_used != NULL;
}

bool cachemodel_access(Cache *c, uint64_t address)
{
    uint64_t line = address >> c->line_shift, tag = line + 1;
    size_t base = (size_t)(line & (c->n_sets - 1)) * c->geometry.assoc;
    uint64_t *tags = c->tags + base, *last_used = c->last_used + base;
    uint32_t victim = 0;
    c->clock++;
    for (uint32_t way = 0; way < c->geometry.assoc; way++) {
        if (tags[way] == tag) {
            last_used[way] = c->clock;
            return true;
        }
        if (last_used[way] < last_used[victim]) {
            victim = way;
        }
    }
    tags[victim] = tag;
    last_used[victim] = c->clock;
    return false;
}
