/* netup: brings up a full-system guest's network for the distributed workload: the loopback and
 * the first other interface with ADDRESS/PREFIX (IPv4), through the same ioctls `ip` uses, so the
 * minimal Debian images need no networking package. Usage: netup ADDRESS/PREFIX [MAC]. With MAC
 * the interface takes that hardware address first: guests restored from one booted snapshot all
 * start with the snapshot's (the NIC follows the driver's choice). Prints the interface it
 * configured. */
#include <arpa/inet.h>
#include <net/if_arp.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what, const char *name)
{
    fprintf(stderr, "netup: %s %s: ", what, name);
    perror(NULL);
    return 1;
}

static int set_up(int fd, const char *name)
{
    struct ifreq req;
    memset(&req, 0, sizeof req);
    strncpy(req.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFFLAGS, &req) < 0) {
        return fail("cannot read the flags of", name);
    }
    req.ifr_flags |= IFF_UP;
    return ioctl(fd, SIOCSIFFLAGS, &req) < 0 ? fail("cannot bring up", name) : 0;
}

static int set_address(int fd, const char *name, unsigned long request, in_addr_t value)
{
    struct ifreq req;
    memset(&req, 0, sizeof req);
    strncpy(req.ifr_name, name, IFNAMSIZ - 1);
    struct sockaddr_in *sin = (struct sockaddr_in *)&req.ifr_addr;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = value;
    return ioctl(fd, request, &req) < 0 ? fail("cannot set the address of", name) : 0;
}

static int set_mac(int fd, const char *name, const char *mac)
{
    struct ifreq req;
    memset(&req, 0, sizeof req);
    strncpy(req.ifr_name, name, IFNAMSIZ - 1);
    unsigned char *bytes = (unsigned char *)req.ifr_hwaddr.sa_data;
    req.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    if (sscanf(mac, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &bytes[0], &bytes[1], &bytes[2], &bytes[3], &bytes[4],
               &bytes[5]) != 6) {
        fprintf(stderr, "netup: %s is not a MAC address\n", mac);
        return 1;
    }
    return ioctl(fd, SIOCSIFHWADDR, &req) < 0 ? fail("cannot set the MAC address of", name) : 0;
}

int main(int argc, char **argv)
{
    char *slash = argc == 2 || argc == 3 ? strchr(argv[1], '/') : NULL;
    struct in_addr address;
    if (slash == NULL) {
        fprintf(stderr, "usage: netup ADDRESS/PREFIX [MAC]\n");
        return 2;
    }
    *slash = '\0';
    int prefix = atoi(slash + 1);
    if (inet_pton(AF_INET, argv[1], &address) != 1 || prefix < 1 || prefix > 32) {
        fprintf(stderr, "netup: %s/%s is not an IPv4 ADDRESS/PREFIX\n", argv[1], slash + 1);
        return 2;
    }
    struct if_nameindex *names = if_nameindex();
    const char *nic = NULL;
    for (struct if_nameindex *i = names; i != NULL && i->if_index != 0; i++) {
        if (strcmp(i->if_name, "lo") != 0) {
            nic = i->if_name;
            break;
        }
    }
    if (nic == NULL) {
        fprintf(stderr, "netup: no network interface besides lo (is the NIC's driver loaded?)\n");
        return 1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    in_addr_t mask = htonl(prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix));
    if (fd < 0 || set_up(fd, "lo") || (argc == 3 && set_mac(fd, nic, argv[2])) ||
        set_address(fd, nic, SIOCSIFADDR, address.s_addr) ||
        set_address(fd, nic, SIOCSIFNETMASK, mask) || set_up(fd, nic)) {
        return 1;
    }
    printf("netup: %s %s/%d\n", nic, inet_ntoa(address), prefix);
    return 0;
}
