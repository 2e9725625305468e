// LD_PRELOAD shim: every sgemm_ call of a process timed by shape, with the page faults it took. Shows which matrix
// products of a step run below the BLAS's rate, on either side of a bench entry (libtorch reaches OpenBLAS through
// libblas.so.3's sgemm_, and daei's attention calls it directly).
//   gcc -O2 -shared -fPIC bench/sgemm_count.c -o /tmp/sgemm_count.so -ldl
//   SGEMM_COUNT_OUT=/tmp/daei.txt LD_PRELOAD=/tmp/sgemm_count.so build/bench_entries t5-step ARGS
//   SGEMM_COUNT_OUT=/tmp/py.txt LD_PRELOAD=/tmp/sgemm_count.so /usr/bin/python3 bench/t5_reference.py step ARGS
//   /usr/bin/python3 bench/sgemm_compare.py /tmp/daei.txt /tmp/py.txt
// Output: a total line, then one line a shape (column-major BLAS arguments: transa transb M N K): calls, seconds,
// GFLOP/s and minor page faults during those calls. Counts the whole process, start-up and warm-up included.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

typedef void (*sgemm_t)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                        const int*, const float*, const int*, const float*, float*, const int*);
enum { CAP = 4096 };
static struct { char ta, tb; int m, n, k; long calls, faults; double s; } tab[CAP];
static int used;
static long dropped;  // calls of shapes beyond CAP: reported, not lost silently
static sgemm_t real;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static long faults(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}
static sgemm_t resolve(void) {
  sgemm_t f = (sgemm_t)dlsym(RTLD_NEXT, "sgemm_");
  if (!f) {  // Python dlopens libtorch with RTLD_LOCAL: the BLAS is not in the global scope
    void* h = dlopen("libblas.so.3", RTLD_NOW);
    f = h ? (sgemm_t)dlsym(h, "sgemm_") : NULL;
  }
  if (!f) {
    fprintf(stderr, "sgemm_count: no sgemm_ to forward to\n");
    abort();
  }
  return f;
}

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  if (!real) real = resolve();
  const long f0 = faults();
  const double t0 = now();
  real(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const double dt = now() - t0;
  const long df = faults() - f0;
  int i = 0;
  while (i < used && !(tab[i].ta == *ta && tab[i].tb == *tb && tab[i].m == *m && tab[i].n == *n && tab[i].k == *k)) ++i;
  if (i == used) {
    if (used == CAP) {
      ++dropped;
      return;
    }
    tab[i].ta = *ta, tab[i].tb = *tb, tab[i].m = *m, tab[i].n = *n, tab[i].k = *k;
    ++used;
  }
  tab[i].calls++, tab[i].s += dt, tab[i].faults += df;
}

__attribute__((destructor)) static void report(void) {
  const char* p = getenv("SGEMM_COUNT_OUT");
  FILE* f = p ? fopen(p, "w") : stderr;
  if (!f) {
    fprintf(stderr, "sgemm_count: cannot write %s; no report\n", p);
    return;
  }
  double s = 0, fl = 0;
  for (int i = 0; i < used; ++i) s += tab[i].s, fl += 2.0 * tab[i].m * tab[i].n * tab[i].k * tab[i].calls;
  fprintf(f, "total %.4f s, %.3f GFLOP, %.1f GFLOP/s, %d shapes, %ld calls of further shapes not counted\n", s,
          fl / 1e9, s > 0 ? fl / s / 1e9 : 0.0, used, dropped);
  for (int i = 0; i < used; ++i)
    fprintf(f, "%c%c %5d %5d %5d calls %7ld  %.6f s  %.1f GFLOP/s faults %ld\n", tab[i].ta, tab[i].tb, tab[i].m,
            tab[i].n, tab[i].k, tab[i].calls, tab[i].s,
            2.0 * tab[i].m * tab[i].n * tab[i].k * tab[i].calls / (tab[i].s > 0 ? tab[i].s : 1) / 1e9, tab[i].faults);
  if (p) fclose(f);
}
