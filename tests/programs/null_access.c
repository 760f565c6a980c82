/* NULL read, write or call, as a program bug would make them: each must die of SIGSEGV. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    volatile int *volatile p = 0;
    void (*volatile fn)(void) = 0;

    if (argc < 2)
        return 2;
    if (!strcmp(argv[1], "read"))
        printf("%x\n", *p);
    else if (!strcmp(argv[1], "write"))
        *p = 1;
    else if (!strcmp(argv[1], "call"))
        fn();
    puts("survived");
    return 0;
}
