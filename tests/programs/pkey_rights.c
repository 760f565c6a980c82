/* pkey_alloc(2) gives the calling thread the new key's rights in its PKRU. Twelve keys are
 * allocated from one call site (trapped, then rewritten for the fast path), each with rights
 * cycling through 0, PKEY_DISABLE_WRITE and PKEY_DISABLE_ACCESS; the rights PKRU shows are
 * printed, then a page of the last writable key is written by a new thread, which starts with
 * its creator's PKRU. Exits 77 without protection keys. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static unsigned rdpkru(void) {
    unsigned eax, edx;
    __asm__ volatile(".byte 0x0f,0x01,0xee" : "=a"(eax), "=d"(edx) : "c"(0));
    return eax;
}

static char *page;

static void *write_page(void *arg) {
    strcpy(page, "written");
    return arg;
}

int main(void) {
    static const int rights[] = {0, PKEY_DISABLE_WRITE, PKEY_DISABLE_ACCESS};
    int open_key = -1;
    for (int i = 0; i < 12; i++) {
        int key = pkey_alloc(0, rights[i % 3]);
        if (key < 0)
            return 77;
        printf("%d:%u ", i, rdpkru() >> (2 * key) & 3);
        if (rights[i % 3] == 0 && i >= 9) {
            open_key = key;
            continue;
        }
        pkey_free(key);
    }
    page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || pkey_mprotect(page, 4096, PROT_READ | PROT_WRITE, open_key) != 0)
        return 2;
    pthread_t t;
    pthread_create(&t, 0, write_page, 0);
    pthread_join(t, 0);
    printf("\n%s\n", page);
    return 0;
}
