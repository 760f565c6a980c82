/* mlockall(MCL_CURRENT), then what it locked: natively every mapping of a small program, a few
 * MiB. Under a profile the runtime's mappings are locked too: they must be as small (the whole
 * profile file, 219 MB, was filled and locked; as an unprivileged user the call failed with
 * ENOMEM over RLIMIT_MEMLOCK). Prints "mlockall R" and "shmem-over-4MiB B". */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
    int r = mlockall(MCL_CURRENT) ? errno : 0;
    long shmem_kb = 0;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "RssShmem:", 9))
            sscanf(line + 9, "%ld", &shmem_kb);
    printf("mlockall %d\nshmem-over-4MiB %d\n", r, shmem_kb > 4096);
    return 0;
}
