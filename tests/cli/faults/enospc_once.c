/* A test-only LD_PRELOAD shim: the disk fills up for exactly one write to the job store.
 *
 * While the file named by $NJ_TEST_ENOSPC_FLAG exists, the next write(2)/pwrite(2) to a
 * file whose path ends in $NJ_TEST_ENOSPC_SUFFIX (default "nightjar.db-wal") removes the
 * flag and fails with ENOSPC, as a full disk would; every other write goes through. Space
 * is "freed" right after, so what the program does next on its orderly way out (releasing
 * its lease) can be written. tests/cli/test_disk_full_releases_lease.py uses it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef ssize_t (*pwrite_fn)(int, const void*, size_t, off_t);

/* 1 when this write should fail: the flag exists (it is removed) and fd is the target. */
static int inject(int fd) {
  const char* flag = getenv("NJ_TEST_ENOSPC_FLAG");
  if (!flag || access(flag, F_OK) != 0) return 0;
  const char* suffix = getenv("NJ_TEST_ENOSPC_SUFFIX");
  if (!suffix) suffix = "nightjar.db-wal";
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const size_t len = (size_t)n, slen = strlen(suffix);
  if (len < slen || strcmp(path + len - slen, suffix) != 0) return 0;
  return unlink(flag) == 0;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static write_fn real;
  if (!real) real = (write_fn)dlsym(RTLD_NEXT, "write");
  if (inject(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  static pwrite_fn real;
  if (!real) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
  if (inject(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  static pwrite_fn real;
  if (!real) real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite64");
  if (inject(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, count, offset);
}
