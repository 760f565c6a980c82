/* Prints the number the program's first open returns: natively the lowest free one, 3, under
 * any descriptor limit. The runtime's own descriptors (its binary, the profile directory, its
 * sockets) sit at 900 and above, or under a limit of 900 or below (`ulimit -n 64`), at the top
 * of the table: before, they took 3, 4 and 5 there, and this printed 5 (6 with --profile). */
#include <fcntl.h>
#include <stdio.h>

int main(void) {
    printf("first descriptor: %d\n", open("/dev/null", O_RDONLY));
    return 0;
}
