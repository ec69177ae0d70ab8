/* LD_PRELOAD shim used to capture failure shapes of nccl-tests on a healthy machine.
   CAPTURE_SHIM=wrong: every ncclAllReduce reduces one element less than asked (the last element
   is left unreduced, so the check counts #wrong > 0).
   CAPTURE_SHIM=segv: the Nth ncclAllReduce call (CAPTURE_SHIM_AFTER, default 40) dereferences a
   null pointer (a segfault inside the collective call). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
typedef int (*allreduce_fn)(const void*, void*, size_t, int, int, void*, void*);
static long calls = 0;
int ncclAllReduce(const void* s, void* r, size_t count, int type, int op, void* comm, void* stream) {
  static allreduce_fn real = 0;
  if (!real) real = (allreduce_fn)dlsym(RTLD_NEXT, "ncclAllReduce");
  const char* mode = getenv("CAPTURE_SHIM");
  if (mode && strcmp(mode, "wrong") == 0 && count > 1) count -= 1;
  if (mode && strcmp(mode, "segv") == 0) {
    const char* after = getenv("CAPTURE_SHIM_AFTER");
    if (++calls >= (after ? atol(after) : 40)) { volatile int* p = 0; *p = 1; }
  }
  return real(s, r, count, type, op, comm, stream);
}
