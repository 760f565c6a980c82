/* netup: brings up a full-system guest's network for the distributed workload: the loopback and
 * the first other interface with ADDRESS/PREFIX (IPv4), through the same ioctls `ip` uses, so the
 * minimal Debian images need no networking package. Usage:
 * netup ADDRESS/PREFIX [MAC [LATENCY_NS [RATE_BYTES_PER_S]]]. With MAC the interface takes that
 * hardware address first: guests restored from one booted snapshot all start with the snapshot's
 * (the NIC follows the driver's choice). With LATENCY_NS the interface sends through the kernel's
 * netem queueing discipline (through rtnetlink, as `tc` would; the sch_netem module): every frame
 * leaves LATENCY_NS after it was queued on the guest's clock, and with RATE_BYTES_PER_S (not 0)
 * no faster than that rate: a link of fixed latency and bandwidth. Prints what it configured. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if_arp.h>
#include <net/if.h>
#include <stdint.h>
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

/* Appends attribute `type` with `bytes` of `data` to the netlink message `h` (room checked by the caller). */
static struct rtattr *add_attribute(struct nlmsghdr *h, unsigned short type, const void *data, size_t bytes)
{
    struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(bytes);
    if (bytes > 0) {
        memcpy(RTA_DATA(a), data, bytes);
    }
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
    return a;
}

/* The interface's root queueing discipline becomes netem with a fixed latency and, when `rate` is
 * not 0, a rate in bytes per second. netem's options are its struct then nested attributes: the
 * 64-bit latency (ns) and rate override the struct's coarser fields. */
static int set_link_model(const char *name, long long latency_ns, unsigned long long rate)
{
    struct {
        struct nlmsghdr h;
        struct tcmsg tc;
        char attributes[256];
    } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = NLMSG_LENGTH(sizeof req.tc);
    req.h.nlmsg_type = RTM_NEWQDISC;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    req.tc.tcm_family = AF_UNSPEC;
    req.tc.tcm_ifindex = (int)if_nametoindex(name);
    req.tc.tcm_handle = 1u << 16;
    req.tc.tcm_parent = TC_H_ROOT;
    add_attribute(&req.h, TCA_KIND, "netem", sizeof "netem");
    struct tc_netem_qopt options = {.limit = 1000, .latency = latency_ns / 64 > UINT32_MAX ? UINT32_MAX
                                                                                       : (uint32_t)(latency_ns / 64)};
    struct rtattr *nest = add_attribute(&req.h, TCA_OPTIONS, &options, sizeof options);
    int64_t latency = latency_ns;
    add_attribute(&req.h, TCA_NETEM_LATENCY64, &latency, sizeof latency);
    if (rate > 0) {
        struct tc_netem_rate coarse = {.rate = rate > UINT32_MAX ? UINT32_MAX : (uint32_t)rate};
        uint64_t exact = rate;
        add_attribute(&req.h, TCA_NETEM_RATE, &coarse, sizeof coarse);
        add_attribute(&req.h, TCA_NETEM_RATE64, &exact, sizeof exact);
    }
    nest->rta_len = (unsigned short)((char *)&req + req.h.nlmsg_len - (char *)nest);
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (fd < 0 || sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        return fail("cannot ask the kernel for netem on", name);
    }
    struct {
        struct nlmsghdr h;
        struct nlmsgerr error;
        char rest[512];
    } answer;
    ssize_t got = recv(fd, &answer, sizeof answer, 0);
    close(fd);
    if (got < (ssize_t)(sizeof answer.h + sizeof answer.error) || answer.h.nlmsg_type != NLMSG_ERROR) {
        fprintf(stderr, "netup: no answer from the kernel to netem on %s\n", name);
        return 1;
    }
    if (answer.error.error != 0) {
        errno = -answer.error.error;
        return fail("cannot put netem (module sch_netem) on", name);
    }
    return 0;
}

int main(int argc, char **argv)
{
    char *slash = argc >= 2 && argc <= 5 ? strchr(argv[1], '/') : NULL;
    struct in_addr address;
    long long latency_ns = argc >= 4 ? atoll(argv[3]) : -1;
    unsigned long long rate = argc == 5 ? strtoull(argv[4], NULL, 10) : 0;
    if (slash == NULL || (argc >= 4 && latency_ns < 0)) {
        fprintf(stderr, "usage: netup ADDRESS/PREFIX [MAC [LATENCY_NS [RATE_BYTES_PER_S]]]\n");
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
    if (fd < 0 || set_up(fd, "lo") || (argc >= 3 && set_mac(fd, nic, argv[2])) ||
        set_address(fd, nic, SIOCSIFADDR, address.s_addr) ||
        set_address(fd, nic, SIOCSIFNETMASK, mask) || set_up(fd, nic) ||
        (latency_ns >= 0 && set_link_model(nic, latency_ns, rate))) {
        return 1;
    }
    printf("netup: %s %s/%d", nic, inet_ntoa(address), prefix);
    if (latency_ns >= 0) {
        printf(" netem latency %lld ns rate %llu B/s", latency_ns, rate);
    }
    printf("\n");
    return 0;
}
