/* The session's network namespace: loopback only, or linked to the service's router over netlink. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sandbox.h"

/* Brings the loopback of the current network namespace up. */
static void loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) error("rocksandbox: socket: %s", strerror(errno));
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int ok = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags |= IFF_UP;
    ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  }
  int saved = errno;
  close(fd);
  if (!ok) error("rocksandbox: loopback up: %s", strerror(saved));
}

/* A network namespace of its own with its loopback up and nothing else: no connection leaves the
 * session. Sockets it opened before (to the service) stay in the host's namespace and keep working. */
SEXP no_network(void) {
  if (unshare(CLONE_NEWNET) != 0) error("rocksandbox: unshare network: %s", strerror(errno));
  loopback_up();
  return R_NilValue;
}

/* Route netlink requests, each sent and its acknowledgement read before the next. */
struct request {
  struct nlmsghdr *head;
  char buf[512];
};

static void begin(struct request *r, int type, int flags, const void *body, size_t len) {
  memset(r->buf, 0, sizeof r->buf);
  r->head = (struct nlmsghdr *)r->buf;
  r->head->nlmsg_type = type;
  r->head->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
  r->head->nlmsg_len = NLMSG_LENGTH(len);
  memcpy(NLMSG_DATA(r->head), body, len);
}

static struct rtattr *attribute(struct request *r, int type, const void *data, size_t len) {
  size_t at = NLMSG_ALIGN(r->head->nlmsg_len);
  if (at + RTA_SPACE(len) > sizeof r->buf) error("rocksandbox: netlink request too long");
  struct rtattr *a = (struct rtattr *)(r->buf + at);
  a->rta_type = type;
  a->rta_len = RTA_LENGTH(len);
  if (len > 0) memcpy(RTA_DATA(a), data, len);
  r->head->nlmsg_len = at + RTA_SPACE(len);
  return a;
}

/* Ends a nested attribute opened by attribute(r, type, NULL, 0) or with a header of its own. */
static void close_nest(struct request *r, struct rtattr *nest) {
  nest->rta_len = (unsigned short)(r->buf + r->head->nlmsg_len - (char *)nest);
}

/* Sends the request; answers 0 or the kernel's errno. */
static int send_request(int fd, struct request *r) {
  if (send(fd, r->buf, r->head->nlmsg_len, 0) < 0) return errno;
  char answer[1024];
  ssize_t n = recv(fd, answer, sizeof answer, 0);
  if (n < 0) return errno;
  struct nlmsghdr *h = (struct nlmsghdr *)answer;
  if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR) return EPROTO;
  int code;
  /* nlmsgerr's first field, read by offset: R's headers define `error` as a macro. */
  memcpy(&code, NLMSG_DATA(h), sizeof code);
  return -code;
}

static void must(int fd, struct request *r, const char *what) {
  int e = send_request(fd, r);
  if (e != 0) error("rocksandbox: %s: %s", what, strerror(e));
}

static int route_socket(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) error("rocksandbox: netlink socket: %s", strerror(errno));
  return fd;
}

static void link_up(int fd, const char *name) {
  struct request r;
  struct ifinfomsg info = {.ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
  begin(&r, RTM_NEWLINK, 0, &info, sizeof info);
  attribute(&r, IFLA_IFNAME, name, strlen(name) + 1);
  must(fd, &r, "link up");
}

static void add_address(int fd, const char *name, struct in_addr address, int prefix) {
  unsigned index = if_nametoindex(name);
  if (index == 0) error("rocksandbox: no interface %s: %s", name, strerror(errno));
  struct request r;
  struct ifaddrmsg msg = {.ifa_family = AF_INET, .ifa_prefixlen = (unsigned char)prefix, .ifa_index = index};
  begin(&r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &msg, sizeof msg);
  attribute(&r, IFA_LOCAL, &address, sizeof address);
  attribute(&r, IFA_ADDRESS, &address, sizeof address);
  must(fd, &r, "address");
}

/* In the router's namespace: the session's end of a link named `name`, its other end in `session_ns`
 * named eth0. A link of that name left by an earlier session of the same uid (its namespace not yet
 * torn down by the kernel) goes first: that session has ended, its uid is handed out only then. */
static void make_link(int fd, const char *name, int session_ns) {
  struct request r;
  struct ifinfomsg info = {.ifi_family = AF_UNSPEC};
  begin(&r, RTM_DELLINK, 0, &info, sizeof info);
  attribute(&r, IFLA_IFNAME, name, strlen(name) + 1);
  int e = send_request(fd, &r);
  if (e != 0 && e != ENODEV) error("rocksandbox: remove stale link %s: %s", name, strerror(e));

  begin(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &info, sizeof info);
  attribute(&r, IFLA_IFNAME, name, strlen(name) + 1);
  struct rtattr *linkinfo = attribute(&r, IFLA_LINKINFO, NULL, 0);
  attribute(&r, IFLA_INFO_KIND, "veth", 5);
  struct rtattr *data = attribute(&r, IFLA_INFO_DATA, NULL, 0);
  struct rtattr *peer = attribute(&r, VETH_INFO_PEER, &info, sizeof info);
  attribute(&r, IFLA_IFNAME, "eth0", 5);
  unsigned ns = (unsigned)session_ns;
  attribute(&r, IFLA_NET_NS_FD, &ns, sizeof ns);
  close_nest(&r, peer);
  close_nest(&r, data);
  close_nest(&r, linkinfo);
  must(fd, &r, "link");
}

static void default_route(int fd, const char *name, struct in_addr gateway) {
  unsigned index = if_nametoindex(name);
  if (index == 0) error("rocksandbox: no interface %s: %s", name, strerror(errno));
  struct request r;
  struct rtmsg msg = {.rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_BOOT, .rtm_scope = RT_SCOPE_UNIVERSE, .rtm_type = RTN_UNICAST};
  begin(&r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &msg, sizeof msg);
  attribute(&r, RTA_GATEWAY, &gateway, sizeof gateway);
  attribute(&r, RTA_OIF, &index, sizeof index);
  must(fd, &r, "default route");
}

static void enter(int ns, const char *which) {
  if (setns(ns, CLONE_NEWNET) != 0) error("rocksandbox: enter the %s network namespace: %s", which, strerror(errno));
}

/* A network namespace of its own with its loopback and one link, eth0, to the service's router
 * namespace (`router`, a descriptor the R server opened; closed here, so that no session holds the
 * router alive once the service is gone): the session's traffic leaves only through the router, which
 * the service filters, and its own loopback is its own (its local servers, PSOCK clusters). The link's
 * two addresses are the pair `link` (the router's end, even) and the next (the session's), a /31. */
SEXP router_network(SEXP router_, SEXP link_, SEXP name_) {
  int router = asInteger(router_);
  struct in_addr ends[2];
  if (inet_pton(AF_INET, CHAR(STRING_ELT(link_, 0)), &ends[0]) != 1) error("rocksandbox: not an IPv4 address: %s", CHAR(STRING_ELT(link_, 0)));
  ends[1].s_addr = htonl(ntohl(ends[0].s_addr) + 1);
  const char *name = CHAR(STRING_ELT(name_, 0));
  if (strlen(name) >= IFNAMSIZ) error("rocksandbox: link name too long: %s", name);

  if (unshare(CLONE_NEWNET) != 0) error("rocksandbox: unshare network: %s", strerror(errno));
  int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) error("rocksandbox: own network namespace: %s", strerror(errno));
  loopback_up();

  enter(router, "router's");
  int fd = route_socket();
  make_link(fd, name, own);
  add_address(fd, name, ends[0], 31);
  link_up(fd, name);
  close(fd);

  enter(own, "session's");
  fd = route_socket();
  add_address(fd, "eth0", ends[1], 31);
  link_up(fd, "eth0");
  default_route(fd, "eth0", ends[0]);
  close(fd);
  close(own);
  close(router);
  return R_NilValue;
}

/* A descriptor of the network namespace at `path` (the service's router's, through /proc), kept open by
 * the R server for its forks; not passed to programs it runs. */
SEXP open_namespace(SEXP path_) {
  const char *path = CHAR(STRING_ELT(path_, 0));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) error("rocksandbox: cannot open %s: %s", path, strerror(errno));
  return ScalarInteger(fd);
}
