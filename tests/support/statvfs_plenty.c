/* LD_PRELOAD shim for tests/e2e/bad_disk.sh: statvfs() of a path under $DAEI_PLENTY_UNDER reports 1 GiB free, so
 * daei's free-space check passes and the full disk is met inside HDF5's writes instead (the path of the exit-time
 * SIGSEGV of issue 32). Built by the test with cc -shared -fPIC. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

static int under(const char* path) {
  const char* root = getenv("DAEI_PLENTY_UNDER");
  return root && *root && path && strncmp(path, root, strlen(root)) == 0;
}

int statvfs(const char* path, struct statvfs* buf) {
  static int (*real)(const char*, struct statvfs*);
  if (!real) real = (int (*)(const char*, struct statvfs*))dlsym(RTLD_NEXT, "statvfs");
  const int r = real(path, buf);
  if (r == 0 && under(path)) buf->f_bavail = buf->f_bfree = (1ull << 30) / (buf->f_frsize ? buf->f_frsize : 4096);
  return r;
}

int statvfs64(const char* path, struct statvfs64* buf) {
  static int (*real)(const char*, struct statvfs64*);
  if (!real) real = (int (*)(const char*, struct statvfs64*))dlsym(RTLD_NEXT, "statvfs64");
  const int r = real(path, buf);
  if (r == 0 && under(path)) buf->f_bavail = buf->f_bfree = (1ull << 30) / (buf->f_frsize ? buf->f_frsize : 4096);
  return r;
}
