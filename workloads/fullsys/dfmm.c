/* dfmm: the full-system guests' dataflow-threads matrix multiply (DF-Threads style, paper 001), on
 * one node or across several. The work is DF-threads, each a function with a frame holding its
 * inputs and a synchronisation count; writing an input into a frame (twrite) decrements its count,
 * and a frame whose count reaches zero is handed to the scheduler of the node the frame lives on,
 * whose worker threads run it. The graph: a pack thread per row panel of A and per column panel of
 * B (copying the panel contiguous), a tile thread per C(i, j) waiting for its two panels (count 2),
 * a reduce thread waiting for every tile (count tiles²) that sums C.
 * Across nodes (as dmm, node 0 holds A and B): the packs and the reduce frame live on node 0, the
 * tile frames of row panel i on node i·NODES/tiles (contiguous blocks of row panels). A twrite to
 * a frame on another node is a message over TCP (header and value), which that node's network
 * thread applies: it writes the value into the frame, counts it down and makes it ready there. A
 * panel goes to a node once, as one message naming every frame of that node it is written into;
 * a tile's product is twritten into node 0's reduce frame (its slot: where the tile lies in C).
 * Region of interest: node 0 from its first frame made to the reduce run; another node from the
 * first byte it received to its last tile's product sent. Statically linked.
 * Usage: dfmm N [WORKERS [TILE [RANK NODES NODE0_ADDRESS[:PORT]]]]. Prints one result line with the
 * region's start and end on the guest's monotonic clock; node 0's checksum is the whole product's
 * (matmul's and dmm's), another node's its tiles'. */
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/uio.h>

#include "blockmul.h"
#define WORKLOAD "dfmm"
#include "nodes.h"

enum { DEFAULT_PORT = 7017, MAX_WORKERS = 64, REDUCE_FRAME = -1 };

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

/* A remote twrite on the wire: the value (`bytes` after the header) is written into `count` frames
 * of the receiving node, tile frames first, first + stride, ...: into input `slot`; or, with
 * first = REDUCE_FRAME, into the reduce frame as the product of tile `slot`. */
typedef struct {
    int32_t first, count, stride, slot;
    uint32_t bytes;
} TwriteMessage;

/* The node's scheduler: a ready queue of frames whose counts reached zero, its workers, and how
 * many frames are still to run on this node (its workers stop at zero). */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    Frame *head, *tail;
    long remaining;
    long executed;
} scheduler = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static int n, tile, tiles, rank, nodes, port = DEFAULT_PORT;
static const double *a, *b;
static double *c, **a_panels, **b_panels;
static Frame **tile_frames, *reduce_frame;
static double checksum;
static int peer[MAX_NODES];                 /* node 0: a socket per other node; another node: peer[0] */
static pthread_mutex_t peer_lock[MAX_NODES];  /* one message at a time on a socket */
static long remote_twrites;                 /* frames counted down by messages from other nodes */

static void *allocate(size_t bytes)
{
    void *p = malloc(bytes);
    if (p == NULL) {
        fprintf(stderr, "dfmm: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* Header and value in one stream of sends (no interleaving with another worker's message). */
static void send_message(int node, const TwriteMessage *header, const void *value)
{
    struct iovec parts[2] = {{(void *)header, sizeof *header}, {(void *)value, header->bytes}};
    pthread_mutex_lock(&peer_lock[node]);
    for (int part = 0; part < 2;) {
        ssize_t sent = writev(peer[node], parts + part, 2 - part);
        if (sent < 0) {
            die("send");
        }
        for (; part < 2 && (size_t)sent >= parts[part].iov_len; part++) {
            sent -= (ssize_t)parts[part].iov_len;
        }
        if (part < 2) {
            parts[part].iov_base = (char *)parts[part].iov_base + sent;
            parts[part].iov_len -= (size_t)sent;
        }
    }
    pthread_mutex_unlock(&peer_lock[node]);
}

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

/* The node row panel p's tile frames live on, and the first row panel of `node` (node = nodes: tiles). */
static int owner(int p)
{
    return (int)((long)p * nodes / tiles);
}

static int first_panel(int node)
{
    return (int)(((long)node * tiles + nodes - 1) / nodes);
}

/* Writes `panel` into `count` tile frames, first, first + stride, ..., on `node`: locally, or as
 * one message that node's network thread applies. */
static void twrite_tiles(int node, int first, int count, int stride, int slot, const double *panel, size_t cells)
{
    if (node == rank) {
        for (int t = 0; t < count; t++) {
            twrite(tile_frames[first + (size_t)t * stride], slot, panel);
        }
        return;
    }
    TwriteMessage header = {first, count, stride, slot, (uint32_t)(cells * sizeof *panel)};
    send_message(node, &header, panel);
}

static void pack_a(Frame *self)
{
    int i = self->i, rows = panel_rows(i);
    double *panel = a_panels[i];
    memcpy(panel, a + (size_t)i * tile * n, (size_t)rows * n * sizeof *panel);
    twrite_tiles(owner(i), i * tiles, tiles, 1, 0, panel, (size_t)rows * n);
}

/* B's column panel j, row by row: panel[k][jj] = B[k][j·tile + jj], to every node's tiles of column j. */
static void pack_b(Frame *self)
{
    int j = self->j, cols = panel_rows(j);
    double *panel = b_panels[j];
    for (int k = 0; k < n; k++) {
        memcpy(panel + (size_t)k * cols, b + (size_t)k * n + (size_t)j * tile, (size_t)cols * sizeof *panel);
    }
    for (int node = 0; node < nodes; node++) {
        int lo = first_panel(node), hi = first_panel(node + 1);
        twrite_tiles(node, lo * tiles + j, hi - lo, tiles, 1, panel, (size_t)n * cols);
    }
}

/* Tile t's product (rows × cols, contiguous) to or from its place in C. */
static void copy_tile(int t, double *packed, int into_c)
{
    int i = t / tiles, j = t % tiles, rows = panel_rows(i), cols = panel_rows(j);
    double *ct = c + (size_t)i * tile * n + (size_t)j * tile;
    for (int ii = 0; ii < rows; ii++) {
        if (into_c) {
            memcpy(ct + (size_t)ii * n, packed + (size_t)ii * cols, (size_t)cols * sizeof *ct);
        } else {
            memcpy(packed + (size_t)ii * cols, ct + (size_t)ii * n, (size_t)cols * sizeof *ct);
        }
    }
}

/* C(i, j) from A's row panel i and B's column panel j, k in the same order as matmul; the product
 * is twritten into the reduce frame (node 0's: over the network from another node). */
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
    if (rank == 0) {
        twrite(reduce_frame, -1, NULL);
        return;
    }
    int t = self->i * tiles + self->j;
    double *packed = allocate((size_t)rows * cols * sizeof *packed);
    copy_tile(t, packed, 0);
    TwriteMessage header = {REDUCE_FRAME, 1, 0, t, (uint32_t)((size_t)rows * cols * sizeof *packed)};
    send_message(0, &header, packed);
    free(packed);
}

static void reduce(Frame *self)
{
    (void)self;
    for (size_t i = 0; i < (size_t)n * n; i++) {
        checksum += c[i];
    }
}

static void *worker(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&scheduler.lock);
        while (scheduler.head == NULL && scheduler.remaining > 0) {
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
        pthread_mutex_lock(&scheduler.lock);
        if (--scheduler.remaining == 0) {
            pthread_cond_broadcast(&scheduler.ready);
        }
        pthread_mutex_unlock(&scheduler.lock);
    }
}

static void bad_message(int from, const TwriteMessage *m)
{
    fprintf(stderr, "dfmm: node %d sent a twrite of %u bytes to frame %d (count %d, stride %d, slot %d) that "
            "node %d does not hold\n", from, m->bytes, m->first, m->count, m->stride, m->slot, rank);
    exit(1);
}

/* The scheduler's network side for one other node: reads `messages` remote twrites from it and
 * applies each to this node's frames. */
typedef struct {
    int from;
    long messages;
} Receiver;

static void *receive_twrites(void *arg)
{
    const Receiver *r = arg;
    int lo = first_panel(rank), hi = first_panel(rank + 1);
    for (long m = 0; m < r->messages; m++) {
        TwriteMessage h;
        recv_all(peer[r->from], &h, sizeof h);
        if (h.first == REDUCE_FRAME) {
            int i = h.slot / tiles, j = h.slot % tiles;
            if (rank != 0 || h.count != 1 || h.slot < 0 || h.slot >= tiles * tiles ||
                h.bytes != (size_t)panel_rows(i) * panel_rows(j) * sizeof(double)) {
                bad_message(r->from, &h);
            }
            double *packed = allocate(h.bytes);
            recv_all(peer[r->from], packed, h.bytes);
            copy_tile(h.slot, packed, 1);
            free(packed);
            __atomic_add_fetch(&remote_twrites, 1, __ATOMIC_RELAXED);
            twrite(reduce_frame, -1, NULL);
            continue;
        }
        int i = h.first / tiles, j = h.first % tiles, last = h.first + (h.count - 1) * h.stride;
        size_t expected = h.slot == 0 ? (size_t)panel_rows(i) * n : (size_t)n * panel_rows(j);
        if (h.first < lo * tiles || h.count < 1 || h.stride < 1 || last >= hi * tiles || (h.slot != 0 && h.slot != 1) ||
            h.bytes != expected * sizeof(double)) {
            bad_message(r->from, &h);
        }
        double *panel = allocate(h.bytes);  /* the frames' input, kept to the end of the run */
        recv_all(peer[r->from], panel, h.bytes);
        __atomic_add_fetch(&remote_twrites, h.count, __ATOMIC_RELAXED);
        for (int t = 0; t < h.count; t++) {
            twrite(tile_frames[h.first + (size_t)t * h.stride], h.slot, panel);
        }
    }
    return NULL;
}

/* A twrite leaves at once, as a DF-threads runtime's would (no Nagle delay). */
static void send_at_once(int fd)
{
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
}

/* The tile frames of this node's row panels (count 2: both panels), and on node 0 the packs
 * (count 1, released at once) and the reduce frame; how many frames will run here. */
static void make_frames(void)
{
    int lo = first_panel(rank), hi = first_panel(rank + 1);
    scheduler.remaining = (long)(hi - lo) * tiles;
    if (rank == 0) {
        reduce_frame = tschedule(reduce, tiles * tiles, 0, 0);
        scheduler.remaining += 2L * tiles + 1;
    }
    for (int i = lo; i < hi; i++) {
        for (int j = 0; j < tiles; j++) {
            tile_frames[(size_t)i * tiles + j] = tschedule(multiply_tile, 2, i, j);
        }
    }
    if (rank == 0) {
        for (int p = 0; p < tiles; p++) {
            twrite(tschedule(pack_a, 1, p, 0), -1, NULL);
            twrite(tschedule(pack_b, 1, 0, p), -1, NULL);
        }
    }
}

int main(int argc, char **argv)
{
    n = argc > 1 ? atoi(argv[1]) : 0;
    int workers = argc > 2 ? atoi(argv[2]) : 1;
    tile = argc > 3 ? atoi(argv[3]) : 32;
    rank = argc == 7 ? atoi(argv[4]) : 0;
    nodes = argc == 7 ? atoi(argv[5]) : 1;
    if (n < 1 || workers < 1 || workers > MAX_WORKERS || tile < 1 || (argc > 4 && argc != 7) || nodes < 1 ||
        nodes > MAX_NODES || rank < 0 || rank >= nodes || nodes > n) {
        fprintf(stderr, "usage: dfmm N [WORKERS 1-%d [TILE [RANK NODES NODE0_ADDRESS[:PORT]]]] (1 <= NODES <= %d and N, "
                "0 <= RANK < NODES)\n", MAX_WORKERS, MAX_NODES);
        return 2;
    }
    char *port_text = argc == 7 ? strchr(argv[6], ':') : NULL;
    if (port_text != NULL) {  /* node 0's port: 7017 between guests, any free one between host processes */
        *port_text = '\0';
        port = atoi(port_text + 1);
        if (port < 1 || port > 65535) {
            fprintf(stderr, "dfmm: %s is not a TCP port\n", port_text + 1);
            return 2;
        }
    }
    tile = tile > n ? n : tile;
    if ((n + tile - 1) / tile < nodes) {  /* every node holds a row panel at least */
        tile = n / nodes;
    }
    tiles = (n + tile - 1) / tile;
    size_t cells = (size_t)n * n;
    c = calloc(cells, sizeof *c);
    tile_frames = calloc((size_t)tiles * tiles, sizeof *tile_frames);
    if (c == NULL || tile_frames == NULL) {
        fprintf(stderr, "dfmm: out of memory for N=%d\n", n);
        return 1;
    }
    Receiver receivers[MAX_NODES];
    int listening = 0;  /* receivers: node 0 one per other node, another node one for node 0 */
    for (int node = 0; node < MAX_NODES; node++) {
        peer[node] = -1;
        pthread_mutex_init(&peer_lock[node], NULL);
    }
    if (rank == 0) {
        double *inputs = allocate(2 * cells * sizeof *inputs);
        fill_inputs(inputs, inputs + cells, cells);
        a = inputs;
        b = inputs + cells;
        a_panels = allocate((size_t)tiles * sizeof *a_panels);
        b_panels = allocate((size_t)tiles * sizeof *b_panels);
        for (int p = 0; p < tiles; p++) {
            a_panels[p] = allocate((size_t)panel_rows(p) * n * sizeof **a_panels);
            b_panels[p] = allocate((size_t)panel_rows(p) * n * sizeof **b_panels);
        }
        accept_nodes(port, nodes, peer);
        for (int node = 1; node < nodes; node++) {
            send_at_once(peer[node]);
        }
        for (int node = 1; node < nodes; node++) {  /* a product per tile of the node's row panels */
            receivers[listening++] = (Receiver){node, (long)(first_panel(node + 1) - first_panel(node)) * tiles};
        }
    } else {
        peer[0] = connect_to_node0(argv[6], port, rank);
        send_at_once(peer[0]);
        /* its row panels of A, and every column panel of B once */
        receivers[listening++] = (Receiver){0, (long)(first_panel(rank + 1) - first_panel(rank)) + tiles};
        /* The first byte node 0 sends opens the region: the wait for node 0 to boot is not work. */
        char first;
        if (recv(peer[0], &first, 1, MSG_PEEK | MSG_WAITALL) != 1) {
            die("recv");
        }
    }
    pthread_t worker_ids[MAX_WORKERS], receiver_ids[MAX_NODES];
    long long begin = monotonic_ns();
    ROI_BEGIN();
    make_frames();
    for (int r = 0; r < listening; r++) {
        pthread_create(&receiver_ids[r], NULL, receive_twrites, &receivers[r]);
    }
    for (int t = 0; t < workers; t++) {
        pthread_create(&worker_ids[t], NULL, worker, NULL);
    }
    for (int t = 0; t < workers; t++) {
        pthread_join(worker_ids[t], NULL);
    }
    for (int r = 0; r < listening; r++) {
        pthread_join(receiver_ids[r], NULL);
    }
    ROI_END();
    long long end = monotonic_ns();
    if (rank > 0) {  /* its tiles' part of the product */
        int lo = first_panel(rank), hi = first_panel(rank + 1);
        checksum = sum(c + (size_t)lo * tile * n, (size_t)((hi * tile < n ? hi * tile : n) - lo * tile) * n);
    }
    printf("coreplane-dfmm n=%d rank=%d nodes=%d workers=%d tile=%d dfthreads=%ld remote_twrites=%ld "
           "roi_ns=%lld-%lld checksum=%.1f\n", n, rank, nodes, workers, tile, scheduler.executed, remote_twrites,
           begin, end, checksum);
    return 0;
}
