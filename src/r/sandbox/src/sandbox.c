/* A session's private temporary folders: a mount namespace of its own (unshare), every mount made
 * private there so nothing propagates back to the host, then a fresh tmpfs on /tmp, /var/tmp and
 * /dev/shm. Runs in the forked session while it is still root, before it drops to its uid. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <net/if.h>
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

static SEXP private_tmp(SEXP keep_) {
  int n = LENGTH(keep_) < KEPT ? LENGTH(keep_) : KEPT;
  if (unshare(CLONE_NEWNS) != 0) error("rocksandbox: unshare: %s", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) error("rocksandbox: private mounts: %s", strerror(errno));
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

/* A network namespace of its own with its loopback up and nothing else: no connection leaves the
 * session. Sockets it opened before (to the service) stay in the host's namespace and keep working. */
static SEXP no_network(void) {
  if (unshare(CLONE_NEWNET) != 0) error("rocksandbox: unshare network: %s", strerror(errno));
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
  return R_NilValue;
}

static const R_CallMethodDef CALLS[] = {
    {"rock_private_tmp", (DL_FUNC)&private_tmp, 1},
    {"rock_no_network", (DL_FUNC)&no_network, 0},
    {NULL, NULL, 0}};

void R_init_rocksandbox(DllInfo *info) {
  R_registerRoutines(info, NULL, CALLS, NULL, NULL);
  R_useDynamicSymbols(info, FALSE);
  R_forceSymbols(info, TRUE);
}
