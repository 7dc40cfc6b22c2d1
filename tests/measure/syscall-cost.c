/* The system calls behind the gate's two disk checks, timed alone: what one
 * `lsp/request` naming a document cannot do without (BENCHMARKS.md,
 * "64 in flight: the floor"). Linux only.
 *
 *   cc -O2 tests/measure/syscall-cost.c -o /tmp/syscall-cost
 *   mkdir -p /tmp/sc/a/b/c && touch /tmp/sc/a/b/c/a.fake
 *   /tmp/syscall-cost /tmp/sc/a/b/c/a.fake
 *
 * Prints the mean of 200,000 calls each: confinement's lookup
 * (openat2 with RESOLVE_NO_SYMLINKS and O_PATH, then close), the freshness
 * stat by path, an fstat of an open descriptor (what a hand-off from the
 * lookup would cost instead), and getppid (a bare system call). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CALLS 200000

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double micros_each(double start) { return (now() - start) / CALLS * 1e6; }

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  const char *path = argv[1];
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
  int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0) {
    perror("openat2");
    return 1;
  }
  struct stat st;
  double start = now();
  for (int i = 0; i < CALLS; i++) close((int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
  double lookup = micros_each(start);
  start = now();
  for (int i = 0; i < CALLS; i++) stat(path, &st);
  double by_path = micros_each(start);
  start = now();
  for (int i = 0; i < CALLS; i++) fstat(fd, &st);
  double by_fd = micros_each(start);
  start = now();
  for (int i = 0; i < CALLS; i++) getppid();
  double bare = micros_each(start);
  printf("openat2+close %.2f us, stat %.2f us, fstat %.2f us, getppid %.2f us\n", lookup, by_path,
         by_fd, bare);
  return 0;
}
