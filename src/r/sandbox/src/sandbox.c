/* What confines a forked R session beyond its uid, run while it is still root, before it drops to its
 * uid: a mount namespace of its own (every mount made private there, so nothing propagates back to the
 * host) with fresh tmpfs on /tmp, /var/tmp and /dev/shm, or a whole minimal root of its own; a network
 * namespace with loopback only, or with a link to the service's router namespace besides. */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Rdynload.h>

static const char *const TEMPORARY[] = {"/tmp", "/var/tmp", "/dev/shm"};

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* `path` lies strictly below `dir`. */
static int below(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* mkdir -p, each new folder 0711: the session's uid must pass through them, and list none. */
static int make_path(const char *path) {
  char buf[4096];
  if (strlen(path) >= sizeof buf) return -1;
  strcpy(buf, path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0711) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0711) != 0 && errno != EEXIST ? -1 : 0;
}

/* Up to this many paths kept reachable (the session's folder, the setup library). */
#define KEPT 8

static void own_mount_namespace(void) {
  if (unshare(CLONE_NEWNS) != 0) error("rocksandbox: unshare: %s", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) error("rocksandbox: private mounts: %s", strerror(errno));
}

static SEXP private_tmp(SEXP keep_) {
  int n = LENGTH(keep_) < KEPT ? LENGTH(keep_) : KEPT;
  own_mount_namespace();
  /* What must stay reachable at its path (the session's folder, the library R loads from), held open
   * in this namespace's mounts, so that it can be bound again once a tmpfs covers its path. */
  int held[KEPT];
  for (int i = 0; i < n; i++) {
    const char *path = CHAR(STRING_ELT(keep_, i));
    held[i] = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (held[i] < 0) error("rocksandbox: cannot open %s: %s", path, strerror(errno));
  }
  for (size_t t = 0; t < sizeof TEMPORARY / sizeof *TEMPORARY; t++) {
    if (!is_dir(TEMPORARY[t])) continue;
    if (mount("tmpfs", TEMPORARY[t], "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) error("rocksandbox: tmpfs on %s: %s", TEMPORARY[t], strerror(errno));
  }
  for (int i = 0; i < n; i++) {
    const char *path = CHAR(STRING_ELT(keep_, i));
    int covered = 0;
    for (size_t t = 0; t < sizeof TEMPORARY / sizeof *TEMPORARY; t++) covered |= below(path, TEMPORARY[t]);
    if (covered) {
      char source[64];
      snprintf(source, sizeof source, "/proc/self/fd/%d", held[i]);
      if (make_path(path) != 0) error("rocksandbox: cannot recreate %s: %s", path, strerror(errno));
      if (mount(source, path, NULL, MS_BIND | MS_REC, NULL) != 0) error("rocksandbox: bind %s: %s", path, strerror(errno));
    }
    close(held[i]);
  }
  return R_NilValue;
}

/* A view of the file system of the session's own, made in place: every folder at the top of / that
 * holds no kept path is covered by an empty tmpfs (a file there by /dev/null); one that holds some is
 * covered too and the kept paths are bound back at their own paths (read-only, or writable for the
 * session's folder; symlinks among them recreated); a few files are written (a passwd naming only root
 * and the session); /dev holds the device nodes R uses; /proc shows only the session's own processes;
 * /tmp, /var/tmp and /dev/shm are private. Covering needs only mount(2), which a container with
 * CAP_SYS_ADMIN may call (Docker's default seccomp profile refuses pivot_root). What lies under a cover
 * stays out of reach: uncovering takes CAP_SYS_ADMIN, which the session has dropped before it runs code. */
#define ROOT_PATHS 128

struct kept {
  const char *path;
  char *link; /* the symlink's target; NULL: not a symlink */
  int fd;
  int writable;
};

struct root {
  struct kept paths[ROOT_PATHS];
  int n;
};

static const struct kept *kept_at(const struct root *root, const char *path) {
  for (int i = 0; i < root->n; i++)
    if (strcmp(root->paths[i].path, path) == 0) return &root->paths[i];
  return NULL;
}

/* Notes a path to keep (absent ones are skipped: a host without /lib64, say); a symlink is kept as a
 * symlink, and what it finally points to is kept too. Opened now: covering hides it. */
static void keep_path(struct root *root, const char *path, int writable) {
  struct stat st;
  if (path[0] != '/' || strcmp(path, "/") == 0 || kept_at(root, path) != NULL || lstat(path, &st) != 0) return;
  if (root->n == ROOT_PATHS) error("rocksandbox: more than %d paths to keep", ROOT_PATHS);
  struct kept *k = &root->paths[root->n];
  k->path = path;
  k->link = NULL;
  k->fd = -1;
  k->writable = writable;
  if (S_ISLNK(st.st_mode)) {
    k->link = R_alloc(PATH_MAX, 1);
    ssize_t len = readlink(path, k->link, PATH_MAX - 1);
    if (len < 0) error("rocksandbox: readlink %s: %s", path, strerror(errno));
    k->link[len] = '\0';
    root->n++;
    char *target = R_alloc(PATH_MAX, 1);
    if (realpath(path, target) != NULL) keep_path(root, target, writable);
    return;
  }
  k->fd = open(path, O_PATH | O_CLOEXEC);
  if (k->fd < 0) error("rocksandbox: cannot open %s: %s", path, strerror(errno));
  root->n++;
}

static int shorter_first(const void *a, const void *b) {
  return (int)strlen(((const struct kept *)a)->path) - (int)strlen(((const struct kept *)b)->path);
}

static void make_parent(const char *path) {
  char parent[PATH_MAX];
  strcpy(parent, path);
  char *slash = strrchr(parent, '/');
  if (slash != NULL && slash != parent) {
    *slash = '\0';
    if (make_path(parent) != 0) error("rocksandbox: cannot make %s: %s", parent, strerror(errno));
  }
}

/* Binds `source` (a descriptor's /proc path, or a path) on `target`, made first as a folder or file. */
static void bind_at(const char *source, const char *target, int is_dir, unsigned long flags) {
  if (is_dir) {
    if (make_path(target) != 0) error("rocksandbox: cannot make %s: %s", target, strerror(errno));
  } else if (access(target, F_OK) != 0) {
    make_parent(target);
    int fd = open(target, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) error("rocksandbox: cannot make %s: %s", target, strerror(errno));
    close(fd);
  }
  if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0) error("rocksandbox: bind %s: %s", target, strerror(errno));
  if (flags != 0 && mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | flags, NULL) != 0) error("rocksandbox: remount %s: %s", target, strerror(errno));
}

static void cover(const char *path, const char *mode) {
  char options[32];
  snprintf(options, sizeof options, "mode=%s", mode);
  if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) error("rocksandbox: tmpfs on %s: %s", path, strerror(errno));
}

static void write_file(const char *path, const char *content) {
  make_parent(path);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) error("rocksandbox: cannot write %s: %s", path, strerror(errno));
  size_t len = strlen(content);
  ssize_t written = write(fd, content, len);
  close(fd);
  if (written != (ssize_t)len) error("rocksandbox: cannot write %s", path);
}

static const char *const DEVICES[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

/* Covers what of the top of / holds nothing kept, or only some of what it holds; a folder kept whole
 * stays, a top-level symlink too (what it points to is covered or kept on its own). */
static void cover_top(const struct root *root, int null_fd) {
  DIR *dir = opendir("/");
  if (dir == NULL) error("rocksandbox: opendir /: %s", strerror(errno));
  struct dirent *e;
  char path[PATH_MAX];
  while ((e = readdir(dir)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "/%s", e->d_name);
    /* /proc and /dev get their own below. */
    if (strcmp(path, "/proc") == 0 || strcmp(path, "/dev") == 0 || kept_at(root, path) != NULL) continue;
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if (S_ISDIR(st.st_mode)) {
      cover(path, "0755");
    } else {
      char source[64];
      snprintf(source, sizeof source, "/proc/self/fd/%d", null_fd);
      if (mount(source, path, NULL, MS_BIND, NULL) != 0) error("rocksandbox: cover %s: %s", path, strerror(errno));
    }
  }
  closedir(dir);
}

static SEXP minimal_root(SEXP read_only_, SEXP read_write_, SEXP files_, SEXP private_tmp_) {
  struct root *root = (struct root *)R_alloc(1, sizeof(struct root));
  root->n = 0;
  own_mount_namespace();
  /* Writable first: a path asked for both ways is writable. */
  for (int i = 0; i < LENGTH(read_write_); i++) keep_path(root, CHAR(STRING_ELT(read_write_, i)), 1);
  for (int i = 0; i < LENGTH(read_only_); i++) keep_path(root, CHAR(STRING_ELT(read_only_, i)), 0);
  int devices[sizeof DEVICES / sizeof *DEVICES];
  for (size_t d = 0; d < sizeof DEVICES / sizeof *DEVICES; d++) devices[d] = open(DEVICES[d], O_PATH | O_CLOEXEC);
  if (devices[0] < 0) error("rocksandbox: no /dev/null: %s", strerror(errno));

  cover_top(root, devices[0]);
  if (asLogical(private_tmp_) == TRUE) {
    for (size_t t = 0; t < sizeof TEMPORARY / sizeof *TEMPORARY; t++) {
      if (make_path(TEMPORARY[t]) != 0) error("rocksandbox: cannot make %s: %s", TEMPORARY[t], strerror(errno));
      cover(TEMPORARY[t], "1777");
    }
  }
  /* Parents before what lies inside them; what lies inside a folder bound the same way is there already. */
  qsort(root->paths, root->n, sizeof *root->paths, shorter_first);
  for (int i = 0; i < root->n; i++) {
    const struct kept *k = &root->paths[i];
    int inside = 0;
    for (int j = 0; j < i && !inside; j++) inside = root->paths[j].link == NULL && root->paths[j].writable == k->writable && below(k->path, root->paths[j].path);
    if (inside) continue;
    if (k->link != NULL) {
      /* A top-level symlink was left as it is; one below was covered with its folder. */
      if (strchr(k->path + 1, '/') == NULL) continue;
      make_parent(k->path);
      if (symlink(k->link, k->path) != 0 && errno != EEXIST) error("rocksandbox: symlink %s: %s", k->path, strerror(errno));
      continue;
    }
    struct stat st;
    if (fstat(k->fd, &st) != 0) error("rocksandbox: stat %s: %s", k->path, strerror(errno));
    char source[64];
    snprintf(source, sizeof source, "/proc/self/fd/%d", k->fd);
    /* No set-user-id program or device of the host's works from what the session can reach. */
    bind_at(source, k->path, S_ISDIR(st.st_mode), MS_NOSUID | MS_NODEV | (k->writable ? 0 : MS_RDONLY));
  }
  SEXP names = getAttrib(files_, R_NamesSymbol);
  for (int i = 0; i < LENGTH(files_); i++) write_file(CHAR(STRING_ELT(names, i)), CHAR(STRING_ELT(files_, i)));

  /* /dev: the device nodes R uses, and its shared memory (private above, or the host's kept). */
  int dev_shm = open("/dev/shm", O_PATH | O_CLOEXEC);
  cover("/dev", "0755");
  for (size_t d = 0; d < sizeof DEVICES / sizeof *DEVICES; d++) {
    if (devices[d] < 0) continue;
    char source[64];
    snprintf(source, sizeof source, "/proc/self/fd/%d", devices[d]);
    bind_at(source, DEVICES[d], 0, 0);
    close(devices[d]);
  }
  static const char *const LINKS[][2] = {{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"}, {"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"}};
  for (size_t l = 0; l < sizeof LINKS / sizeof *LINKS; l++)
    if (symlink(LINKS[l][1], LINKS[l][0]) != 0) error("rocksandbox: symlink %s: %s", LINKS[l][0], strerror(errno));
  if (dev_shm >= 0) {
    char source[64];
    snprintf(source, sizeof source, "/proc/self/fd/%d", dev_shm);
    bind_at(source, "/dev/shm", 1, 0);
    close(dev_shm);
  }
  /* A /proc of its own that lists only the processes of the session's uid (hidepid); a host that
   * refuses a new one keeps its own. Last: the binds above go through /proc/self/fd. */
  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2");
  for (int i = 0; i < root->n; i++)
    if (root->paths[i].fd >= 0) close(root->paths[i].fd);
  return R_NilValue;
}

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
static SEXP no_network(void) {
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
static SEXP router_network(SEXP router_, SEXP link_, SEXP name_) {
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
static SEXP open_namespace(SEXP path_) {
  const char *path = CHAR(STRING_ELT(path_, 0));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) error("rocksandbox: cannot open %s: %s", path, strerror(errno));
  return ScalarInteger(fd);
}

/* Binds the file `source` on `target` in a mount namespace of its own. */
static SEXP private_file(SEXP source_, SEXP target_) {
  const char *source = CHAR(STRING_ELT(source_, 0));
  const char *target = CHAR(STRING_ELT(target_, 0));
  own_mount_namespace();
  if (mount(source, target, NULL, MS_BIND, NULL) != 0) error("rocksandbox: bind %s on %s: %s", source, target, strerror(errno));
  if (mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) error("rocksandbox: remount %s: %s", target, strerror(errno));
  return R_NilValue;
}

static const R_CallMethodDef CALLS[] = {
    {"rock_private_tmp", (DL_FUNC)&private_tmp, 1},
    {"rock_minimal_root", (DL_FUNC)&minimal_root, 4},
    {"rock_no_network", (DL_FUNC)&no_network, 0},
    {"rock_router_network", (DL_FUNC)&router_network, 3},
    {"rock_open_namespace", (DL_FUNC)&open_namespace, 1},
    {"rock_private_file", (DL_FUNC)&private_file, 2},
    {NULL, NULL, 0}};

void R_init_rocksandbox(DllInfo *info) {
  R_registerRoutines(info, NULL, CALLS, NULL, NULL);
  R_useDynamicSymbols(info, FALSE);
  R_forceSymbols(info, TRUE);
}
