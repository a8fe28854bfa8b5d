/*
 * A C load client for Rserve's QAP1 protocol, the counterpart of h2load for the HTTP peers in
 * peers-bench.ts: the client's own cost must not hide the server's, and a Node client costs more per
 * call than Rserve itself does for `1+1`. Built by the bench with cc.
 *
 *   qap-load PORT eval N CLIENTS SETUP EXPR   each client: connect, CMD_voidEval SETUP (if not empty),
 *                                             one untimed CMD_eval EXPR, then N timed, one in flight
 *   qap-load PORT connect N CLIENTS           each client: N times connect, read the ID string, close
 *
 * Prints one line of JSON: requests, wall seconds (from all clients ready to the last done), the
 * mean and median time per request in microseconds, and the bytes of the last answer.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CMD_VOID_EVAL 0x002
#define CMD_EVAL 0x003
#define RESP_OK 0x10001
#define DT_STRING 4

static int port, n, clients;
static const char *mode, *setup, *expr;
static pthread_barrier_t ready;
static double *times_us;
static long long last_bytes;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
  fprintf(stderr, "qap-load: %s\n", what);
  exit(1);
}

static void read_full(int fd, void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, (char *)buf + got, len - got);
    if (r <= 0) die("connection closed by Rserve");
    got += (size_t)r;
  }
}

static void write_full(int fd, const void *buf, size_t len) {
  size_t put = 0;
  while (put < len) {
    ssize_t w = write(fd, (const char *)buf + put, len - put);
    if (w <= 0) die("write to Rserve failed");
    put += (size_t)w;
  }
}

static int open_conn(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("cannot connect to Rserve");
  char id[32];
  read_full(fd, id, sizeof id);
  if (memcmp(id, "Rsrv", 4) != 0) die("not an Rserve QAP1 server");
  return fd;
}

/* One command with one DT_STRING parameter; reads and checks the whole answer. */
static long long command(int fd, int cmd, const char *text, char **buf, size_t *cap) {
  size_t len = strlen(text), padded = (len + 1 + 3) & ~(size_t)3;
  size_t total = 16 + 4 + padded;
  if (*cap < total) {
    *cap = total;
    *buf = realloc(*buf, *cap);
  }
  uint32_t *h = (uint32_t *)*buf;
  memset(*buf, 0, total);
  h[0] = (uint32_t)cmd;
  h[1] = (uint32_t)(4 + padded);
  h[4] = (uint32_t)(DT_STRING | (padded << 8));
  memcpy(*buf + 20, text, len);
  write_full(fd, *buf, total);
  uint32_t r[4];
  read_full(fd, r, sizeof r);
  long long body = (long long)r[1] + ((long long)r[3] << 32);
  if (*cap < (size_t)body) {
    *cap = (size_t)body;
    *buf = realloc(*buf, *cap);
  }
  if (body > 0) read_full(fd, *buf, (size_t)body);
  if ((int)r[0] != RESP_OK) die("Rserve answered an error");
  return body;
}

static void *client(void *arg) {
  long me = (long)arg;
  char *buf = NULL;
  size_t cap = 0;
  int fd = -1;
  if (strcmp(mode, "connect") != 0) {
    fd = open_conn();
    if (setup[0] != '\0') command(fd, CMD_VOID_EVAL, setup, &buf, &cap);
    /* Untimed: a new connection is a new fork, whose first evaluation grows R's heap. */
    if (strcmp(mode, "eval") == 0) command(fd, CMD_EVAL, expr, &buf, &cap);
  }
  pthread_barrier_wait(&ready);
  for (int i = 0; i < n; i++) {
    double t = now();
    if (strcmp(mode, "connect") == 0) {
      int c = open_conn();
      close(c);
    } else {
      last_bytes = command(fd, CMD_EVAL, expr, &buf, &cap);
    }
    times_us[me * n + i] = (now() - t) * 1e6;
  }
  if (fd >= 0) close(fd);
  free(buf);
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 5) die("usage: qap-load PORT eval|connect N CLIENTS [SETUP EXPR]");
  port = atoi(argv[1]);
  mode = argv[2];
  n = atoi(argv[3]);
  clients = atoi(argv[4]);
  setup = argc > 5 ? argv[5] : "";
  expr = argc > 6 ? argv[6] : "";
  if (n <= 0 || clients <= 0) die("N and CLIENTS must be positive");
  if (strcmp(mode, "eval") != 0 && strcmp(mode, "connect") != 0) die("mode must be eval or connect");
  if (strcmp(mode, "eval") == 0 && expr[0] == '\0') die("eval needs an expression");
  times_us = calloc((size_t)n * clients, sizeof *times_us);
  pthread_barrier_init(&ready, NULL, (unsigned)clients + 1);
  pthread_t *threads = calloc((size_t)clients, sizeof *threads);
  for (long c = 0; c < clients; c++) pthread_create(&threads[c], NULL, client, (void *)c);
  pthread_barrier_wait(&ready);
  double start = now();
  for (int c = 0; c < clients; c++) pthread_join(threads[c], NULL);
  double wall = now() - start;
  size_t all = (size_t)n * clients;
  double sum = 0;
  for (size_t i = 0; i < all; i++) sum += times_us[i];
  qsort(times_us, all, sizeof *times_us, by_value);
  printf("{\"requests\":%zu,\"seconds\":%.6f,\"meanUs\":%.1f,\"p50Us\":%.1f,\"bytes\":%lld}\n", all, wall, sum / all, times_us[(all - 1) / 2], last_bytes);
  return 0;
}
