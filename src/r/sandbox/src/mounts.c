/* The session's mount namespace: private temporary folders, a minimal root of its own, a file of its
 * own at a path. */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sandbox.h"

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

SEXP private_tmp(SEXP keep_) {
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

SEXP minimal_root(SEXP read_only_, SEXP read_write_, SEXP files_, SEXP private_tmp_) {
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

/* Binds the file `source` on `target` in a mount namespace of its own. */
SEXP private_file(SEXP source_, SEXP target_) {
  const char *source = CHAR(STRING_ELT(source_, 0));
  const char *target = CHAR(STRING_ELT(target_, 0));
  own_mount_namespace();
  if (mount(source, target, NULL, MS_BIND, NULL) != 0) error("rocksandbox: bind %s on %s: %s", source, target, strerror(errno));
  if (mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0) error("rocksandbox: remount %s: %s", target, strerror(errno));
  return R_NilValue;
}
