/* capget and capset name the calling thread (pid 0 in their header): the program clears its
 * effective capabilities and reads them back. Natively "effective 0". Exits 77 unless it starts
 * with some (root). */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &head, data) != 0 || (data[0].effective == 0 && data[1].effective == 0))
        return 77;
    for (int i = 0; i < 3; i++) /* delegated calls first, so that delegates run */
        close(dup(1));
    data[0].effective = data[1].effective = 0;
    if (syscall(SYS_capset, &head, data) != 0)
        return 2;
    syscall(SYS_capget, &head, data);
    printf("effective %x\n", data[0].effective | data[1].effective);
    return 0;
}
