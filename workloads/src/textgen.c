/* textgen: text for the data-analysis benchmarks (sort, grep, word count), after the idea of
 * BigDataBench's text generator: words drawn from a fixed vocabulary with Zipf frequencies
 * (s = 1), 4 to 19 words a line, so that a few words are very common and most are rare, as in
 * natural text. Deterministic for a seed.
 * textgen SIZE_MIB SEED   writes SIZE_MIB MiB (whole lines, at least that much) to stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 50000
#define LINE_MAX_BYTES 4096

static uint64_t state;

/* xorshift64*: fast, and the same stream for the same seed on every machine. */
static uint64_t next(void) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ull;
}

static char vocabulary[WORDS][16];
static double cdf[WORDS];

/* Word w: 2-10 letters from consonant-vowel syllables, made from w so the vocabulary is fixed. */
static void make_vocabulary(void) {
    static const char *consonants = "bcdfghjklmnprstvwz", *vowels = "aeiou";
    uint64_t saved = state;
    state = 0x9e3779b97f4a7c15ull;
    for (int w = 0; w < WORDS; w++) {
        int len = 2 + (int)(next() % 9), i = 0;
        while (i < len) {
            vocabulary[w][i++] = consonants[next() % 18];
            if (i < len) vocabulary[w][i++] = vowels[next() % 5];
        }
        vocabulary[w][i] = 0;
    }
    double sum = 0;
    for (int w = 0; w < WORDS; w++) cdf[w] = (sum += 1.0 / (w + 1));
    for (int w = 0; w < WORDS; w++) cdf[w] /= sum;
    state = saved;
}

static int draw(void) {
    double u = (double)(next() >> 11) / 9007199254740992.0;
    int lo = 0, hi = WORDS - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[1]) <= 0) {
        fprintf(stderr, "usage: textgen SIZE_MIB SEED\n");
        return 2;
    }
    uint64_t target = (uint64_t)atol(argv[1]) << 20, written = 0;
    state = (uint64_t)strtoull(argv[2], NULL, 10) * 0x2545f4914f6cdd1dull + 1;
    make_vocabulary();
    static char out[1 << 20];
    size_t used = 0;
    while (written < target) {
        char line[LINE_MAX_BYTES];
        size_t n = 0;
        for (int k = 4 + (int)(next() % 16); k > 0; k--) {
            const char *word = vocabulary[draw()];
            size_t len = strlen(word);
            memcpy(line + n, word, len);
            n += len;
            line[n++] = k > 1 ? ' ' : '\n';
        }
        if (used + n > sizeof out) {
            if (fwrite(out, 1, used, stdout) != used) { perror("textgen: write"); return 1; }
            used = 0;
        }
        memcpy(out + used, line, n);
        used += n;
        written += n;
    }
    if (fwrite(out, 1, used, stdout) != used || fflush(stdout)) { perror("textgen: write"); return 1; }
    return 0;
}
