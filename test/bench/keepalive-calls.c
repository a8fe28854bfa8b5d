/*
 * One HTTP/1.1 keep-alive connection sending the same request again and again, timing each call, with
 * pauses in between: what a first client meets after a start, and after the server stayed idle
 * (test/bench/first-calls-bench.ts). A C client, so that the client's own warm-up does not hide the
 * server's.
 *
 *   keepalive-calls HOST PORT REQUEST_FILE PLAN
 *
 * REQUEST_FILE holds the whole request (headers and body). PLAN is a comma-separated list of call
 * counts and pauses, e.g. "20,200,3000,p5000,20": 20 calls, 200 calls, 3000 calls, 5000 ms without a
 * call, 20 calls. Each call prints "<step> <nanoseconds>" on a line; any answer but a 200 with a
 * Content-Length, or a closed connection, ends it with status 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static char answer[1 << 20];

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void fail(const char *what) {
  fprintf(stderr, "keepalive-calls: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
  exit(1);
}

static void send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write");
    p += w;
    n -= (size_t)w;
  }
}

/* Reads one answer: headers, then Content-Length bytes of body. */
static void read_answer(int fd) {
  size_t have = 0;
  char *end = NULL;
  while (end == NULL) {
    if (have == sizeof answer - 1) fail("headers too large");
    ssize_t r = read(fd, answer + have, sizeof answer - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("connection closed before an answer");
    have += (size_t)r;
    answer[have] = 0;
    end = strstr(answer, "\r\n\r\n");
  }
  if (strncmp(answer, "HTTP/1.1 200 ", 13) != 0) {
    errno = 0;
    fail("an answer other than 200");
  }
  long length = -1;
  for (char *line = strstr(answer, "\r\n"); line != NULL && line < end; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, "content-length:", 15) == 0) length = strtol(line + 17, NULL, 10);
  }
  if (length < 0) {
    errno = 0;
    fail("an answer without Content-Length");
  }
  size_t want = (size_t)(end + 4 - answer) + (size_t)length;
  while (have < want) {
    char sink[65536];
    size_t left = want - have;
    ssize_t r = read(fd, sink, left < sizeof sink ? left : sizeof sink);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("connection closed in an answer's body");
    have += (size_t)r;
  }
  if (have > want) {
    errno = 0;
    fail("more bytes than one answer");
  }
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: keepalive-calls HOST PORT REQUEST_FILE PLAN\n");
    return 2;
  }
  FILE *f = fopen(argv[3], "rb");
  if (f == NULL) fail("request file");
  static char request[1 << 16];
  size_t request_len = fread(request, 1, sizeof request, f);
  fclose(f);

  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
  if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) fail("HOST must be an IPv4 address");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) fail("connect");

  int step = 0;
  for (char *item = strtok(argv[4], ","); item != NULL; item = strtok(NULL, ","), step++) {
    if (item[0] == 'p') {
      struct timespec pause = {.tv_sec = atol(item + 1) / 1000, .tv_nsec = (atol(item + 1) % 1000) * 1000000L};
      while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
      continue;
    }
    long calls = atol(item);
    for (long i = 0; i < calls; i++) {
      long long t0 = now_ns();
      send_all(fd, request, request_len);
      read_answer(fd);
      printf("%d %lld\n", step, now_ns() - t0);
    }
  }
  close(fd);
  return 0;
}
