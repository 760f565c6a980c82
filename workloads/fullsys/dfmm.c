/* dfmm: the full-system guests' dataflow-threads matrix multiply (DF-Threads style, paper 001): the
 * work is DF-threads, each a function with a frame holding its inputs and a synchronisation
 * count; writing an input into a frame (twrite) decrements its count, and a frame whose count
 * reaches zero is handed to the node's scheduler, whose worker threads run it. The graph: a pack
 * thread per row panel of A and per column panel of B (copying the panel contiguous), a tile
 * thread per C(i, j) waiting for its two panels (count 2), a reduce thread waiting for every tile
 * (count tiles²) that sums C. The whole graph is the region of interest. One node only (remote
 * frames over the network are not written). Usage: dfmm N [WORKERS [TILE]]. Prints one result
 * line; the checksum is matmul's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockmul.h"

typedef struct Frame Frame;
typedef void (*DfFunction)(Frame *);

/* A DF-thread's frame: its function, its synchronisation count and its inputs. */
struct Frame {
    DfFunction function;
    int sync_count;
    int i, j;           /* the panel or tile it is about */
    const double *in[2];  /* inputs written by its producers: A's row panel, B's column panel */
    Frame *next;        /* in the ready queue */
};

/* The node's scheduler: a ready queue of frames whose counts reached zero, and its workers. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    Frame *head, *tail;
    int done;
    long executed;
} scheduler = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static int n, tile, tiles;
static const double *a, *b;
static double *c, **a_panels, **b_panels;
static Frame **tile_frames, *reduce_frame;
static double checksum;

static Frame *tschedule(DfFunction function, int sync_count, int i, int j)
{
    Frame *f = calloc(1, sizeof *f);
    if (f == NULL) {
        fprintf(stderr, "dfmm: out of memory for a frame\n");
        exit(1);
    }
    *f = (Frame){.function = function, .sync_count = sync_count, .i = i, .j = j};
    return f;
}

static void make_ready(Frame *f)
{
    pthread_mutex_lock(&scheduler.lock);
    if (scheduler.tail != NULL) {
        scheduler.tail->next = f;
    } else {
        scheduler.head = f;
    }
    scheduler.tail = f;
    pthread_cond_signal(&scheduler.ready);
    pthread_mutex_unlock(&scheduler.lock);
}

/* Writes an input into `f` (slot -1: a pure synchronisation) and counts it down. */
static void twrite(Frame *f, int slot, const double *value)
{
    if (slot >= 0) {
        f->in[slot] = value;
    }
    if (__atomic_sub_fetch(&f->sync_count, 1, __ATOMIC_ACQ_REL) == 0) {
        make_ready(f);
    }
}

static int panel_rows(int p)
{
    return (p + 1) * tile < n ? tile : n - p * tile;
}

static void pack_a(Frame *self)
{
    int i = self->i, rows = panel_rows(i);
    double *panel = a_panels[i];
    memcpy(panel, a + (size_t)i * tile * n, (size_t)rows * n * sizeof *panel);
    for (int j = 0; j < tiles; j++) {
        twrite(tile_frames[(size_t)i * tiles + j], 0, panel);
    }
}

/* B's column panel j, row by row: panel[k][jj] = B[k][j·tile + jj]. */
static void pack_b(Frame *self)
{
    int j = self->j, cols = panel_rows(j);
    double *panel = b_panels[j];
    for (int k = 0; k < n; k++) {
        memcpy(panel + (size_t)k * cols, b + (size_t)k * n + (size_t)j * tile, (size_t)cols * sizeof *panel);
    }
    for (int i = 0; i < tiles; i++) {
        twrite(tile_frames[(size_t)i * tiles + j], 1, panel);
    }
}

/* C(i, j) from A's row panel i and B's column panel j, k in the same order as matmul. */
static void multiply_tile(Frame *self)
{
    int rows = panel_rows(self->i), cols = panel_rows(self->j);
    const double *ap = self->in[0], *bp = self->in[1];
    double *ct = c + (size_t)self->i * tile * n + (size_t)self->j * tile;
    for (int ii = 0; ii < rows; ii++) {
        for (int k = 0; k < n; k++) {
            double aik = ap[(size_t)ii * n + k];
            for (int jj = 0; jj < cols; jj++) {
                ct[(size_t)ii * n + jj] += aik * bp[(size_t)k * cols + jj];
            }
        }
    }
    twrite(reduce_frame, -1, NULL);
}

static void reduce(Frame *self)
{
    (void)self;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        checksum += c[i];
    }
    pthread_mutex_lock(&scheduler.lock);
    scheduler.done = 1;
    pthread_cond_broadcast(&scheduler.ready);
    pthread_mutex_unlock(&scheduler.lock);
}

static void *worker(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&scheduler.lock);
        while (scheduler.head == NULL && !scheduler.done) {
            pthread_cond_wait(&scheduler.ready, &scheduler.lock);
        }
        Frame *f = scheduler.head;
        if (f == NULL) {
            pthread_mutex_unlock(&scheduler.lock);
            return NULL;
        }
        scheduler.head = f->next;
        if (scheduler.head == NULL) {
            scheduler.tail = NULL;
        }
        scheduler.executed++;
        pthread_mutex_unlock(&scheduler.lock);
        f->function(f);
        free(f);  /* tdestroy: a DF-thread's frame ends with it */
    }
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atoi(argv[1]) : 0;
    int workers = argc > 2 ? atoi(argv[2]) : 1;
    tile = argc > 3 ? atoi(argv[3]) : 32;
    if (n < 1 || workers < 1 || workers > 64 || tile < 1) {
        fprintf(stderr, "usage: dfmm N [WORKERS 1-64 [TILE]]\n");
        return 2;
    }
    tile = tile > n ? n : tile;
    tiles = (n + tile - 1) / tile;
    size_t cells = (size_t)n * n;
    double *inputs = malloc(2 * cells * sizeof *inputs);
    c = calloc(cells, sizeof *c);
    a_panels = calloc((size_t)tiles, sizeof *a_panels);
    b_panels = calloc((size_t)tiles, sizeof *b_panels);
    tile_frames = calloc((size_t)tiles * tiles, sizeof *tile_frames);
    if (inputs == NULL || c == NULL || a_panels == NULL || b_panels == NULL || tile_frames == NULL) {
        fprintf(stderr, "dfmm: out of memory for N=%d\n", n);
        return 1;
    }
    fill_inputs(inputs, inputs + cells, cells);
    a = inputs;
    b = inputs + cells;
    for (int p = 0; p < tiles; p++) {
        a_panels[p] = malloc((size_t)panel_rows(p) * n * sizeof **a_panels);
        b_panels[p] = malloc((size_t)panel_rows(p) * n * sizeof **b_panels);
        if (a_panels[p] == NULL || b_panels[p] == NULL) {
            fprintf(stderr, "dfmm: out of memory for the panels\n");
            return 1;
        }
    }
    pthread_t tid[64];
    ROI_BEGIN();
    reduce_frame = tschedule(reduce, tiles * tiles, 0, 0);
    for (int i = 0; i < tiles; i++) {
        for (int j = 0; j < tiles; j++) {
            tile_frames[(size_t)i * tiles + j] = tschedule(multiply_tile, 2, i, j);
        }
    }
    for (int p = 0; p < tiles; p++) {  /* the packs wait for nothing: count 1, released here */
        twrite(tschedule(pack_a, 1, p, 0), -1, NULL);
        twrite(tschedule(pack_b, 1, 0, p), -1, NULL);
    }
    for (int t = 0; t < workers; t++) {
        pthread_create(&tid[t], NULL, worker, NULL);
    }
    for (int t = 0; t < workers; t++) {
        pthread_join(tid[t], NULL);
    }
    ROI_END();
    printf("coreplane-dfmm n=%d workers=%d tile=%d dfthreads=%ld checksum=%.1f\n", n, workers, tile,
           scheduler.executed, checksum);
    return 0;
}
