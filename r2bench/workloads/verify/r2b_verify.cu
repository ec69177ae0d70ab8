// r2b_verify: r2bench's verification workload. Runs a NCCL collective for -n timed iterations
// per size and checks EVERY element of EVERY timed iteration on EVERY rank on the GPU against
// a closed form (exact small integers in float, different per rank and per iteration), outside
// the timed part. nccl-tests' flags and text layout, so r2bench's parsers read it unchanged;
// one `#iter {json}` line per timed iteration and a `#verify {json}` summary (docs/verify.md).
//
// Build (one line; the recipe plugin/verify.yaml holds it):
//   nvcc -O3 -std=c++17 <gencode> -I<nccl>/include -I<mpi>/include r2b_verify.cu -o r2b_verify \
//        -L<nccl>/lib -lnccl -L<mpi>/lib -lmpi -Xlinker -rpath=<nccl>/lib
// Without MPI: add -DR2B_NO_MPI, drop the MPI flags, and start every process with NCCL_COMM_ID
// (host:port of rank 0), R2B_RANK and R2B_NRANKS.
//
// Exit codes: 0 every checked element right, 2 wrong results, 1 error (usage, CUDA, NCCL,
// -T timeout).

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <getopt.h>
#include <nccl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#ifndef R2B_NO_MPI
#include <mpi.h>
#endif

#define R2B_VERIFY_VERSION "1"
#define PROGRAM "r2b_verify"

static const int EXIT_OK = 0, EXIT_ERROR = 1, EXIT_WRONG = 2;
// Inputs: element j of rank r in collective call k is base(j, k) + r + 1, with
// base(j, k) = (j + k * STRIDE) mod PERIOD. PERIOD is prime and STRIDE is not a multiple of it,
// so two calls less than PERIOD apart differ in every element (a stale or repeated buffer is
// caught), and sums over up to 16,000 ranks stay exact in float (below 2^24).
static const uint32_t PERIOD = 1021, STRIDE = 7919;

enum Coll { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST };
static const char* COLL_NAMES[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};

static char g_host[256] = "?";
static void fail_exit(int code);

#define CUDACHECK(cmd)                                                                       \
  do {                                                                                       \
    cudaError_t e_ = (cmd);                                                                  \
    if (e_ != cudaSuccess) {                                                                 \
      printf("%s: Test CUDA failure %s:%d '%s'\n", g_host, "r2b_verify.cu", __LINE__,        \
             cudaGetErrorString(e_));                                                        \
      fail_exit(EXIT_ERROR);                                                                 \
    }                                                                                        \
  } while (0)

#define NCCLCHECK(cmd)                                                                       \
  do {                                                                                       \
    ncclResult_t r_ = (cmd);                                                                 \
    if (r_ != ncclSuccess) {                                                                 \
      printf("%s: Test NCCL failure %s:%d '%s'\n", g_host, "r2b_verify.cu", __LINE__,        \
             ncclGetErrorString(r_));                                                        \
      fail_exit(EXIT_ERROR);                                                                 \
    }                                                                                        \
  } while (0)

static void usage_exit(const char* msg) {
  fprintf(stderr, "%s: %s\n", PROGRAM, msg);
  fflush(stderr);
  fail_exit(EXIT_ERROR);
}

// ------------------------------------------------------------------------------ control plane
// Small exchanges between ranks (hostnames, per-iteration times and mismatch counts): MPI, or
// NCCL itself where the program is built without MPI.
struct Ctrl {
  int rank = 0, nranks = 1;
  ncclComm_t comm = nullptr;  // for the NCCL control plane (no MPI)
  void* dbuf = nullptr;
  size_t dbytes = 0;
  cudaStream_t stream = nullptr;

  void allgather(const void* mine, void* all, size_t bytes) {
#ifndef R2B_NO_MPI
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
#else
    if (comm == nullptr) usage_exit("control exchange before the communicator exists");
    if (bytes * nranks > dbytes) {
      if (dbuf) CUDACHECK(cudaFree(dbuf));
      dbytes = bytes * nranks;
      CUDACHECK(cudaMalloc(&dbuf, dbytes));
    }
    char* d = (char*)dbuf;
    CUDACHECK(cudaMemcpy(d + rank * bytes, mine, bytes, cudaMemcpyHostToDevice));
    NCCLCHECK(ncclAllGather(d + rank * bytes, d, bytes, ncclChar, comm, stream));
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaMemcpy(all, d, bytes * nranks, cudaMemcpyDeviceToHost));
#endif
  }

  void barrier() {
#ifndef R2B_NO_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#else
    char mine = 0;
    std::vector<char> all(nranks);
    allgather(&mine, all.data(), 1);
#endif
  }
};
static Ctrl g_ctrl;

static void fail_exit(int code) {
  fflush(stdout);
#ifndef R2B_NO_MPI
  int up = 0;
  MPI_Initialized(&up);
  if (up) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  exit(code);
}

[[maybe_unused]] static int env_int(const char* const* names, int fallback) {
  for (int i = 0; names[i]; i++) {
    const char* v = getenv(names[i]);
    if (v && *v) return atoi(v);
  }
  return fallback;
}

// ------------------------------------------------------------------------------ options
struct Options {
  size_t min_bytes = 32 << 20, max_bytes = 32 << 20, step_bytes = 1 << 20;
  int step_factor = 1, iters = 20, warmup = 1, check = 1, cycles = 1, timestamps = 0;
  int per_iter = 0, timeout_s = 0, root = 0;
  Coll coll = ALL_REDUCE;
  long corrupt_iter = -1;  // self-test: the timed iteration to corrupt (-1: none)
  int corrupt_rank = -1;   // -1: the last rank
  const char* corrupt_from = nullptr;
  std::string json_path;
};

static size_t parse_size(const char* text) {
  char* end = nullptr;
  double v = strtod(text, &end);
  size_t unit = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': unit = 1ull << 10; break;
      case 'm': case 'M': unit = 1ull << 20; break;
      case 'g': case 'G': unit = 1ull << 30; break;
      default: unit = 0;
    }
    if (end[1] != '\0') unit = 0;
  }
  if (end == text || unit == 0 || v < 0) {
    fprintf(stderr, "%s: invalid size '%s' (e.g. 8, 1K, 64M, 1G)\n", PROGRAM, text);
    fail_exit(EXIT_ERROR);
  }
  return (size_t)(v * (double)unit);
}

static int parse_int(const char* text, const char* flag) {
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (end == text || *end) {
    fprintf(stderr, "%s: %s '%s' is not a whole number\n", PROGRAM, flag, text);
    fail_exit(EXIT_ERROR);
  }
  return (int)v;
}

// "ITER" or "ITER:RANK"
static void parse_corrupt(Options& o, const char* text, const char* from) {
  char* end = nullptr;
  long it = strtol(text, &end, 10);
  int rank = -1;
  if (end != text && *end == ':') {
    char* end2 = nullptr;
    rank = (int)strtol(end + 1, &end2, 10);
    if (end2 == end + 1 || *end2) end = end2 = nullptr;
    else end = end2;
  }
  if (end == nullptr || end == text || *end || it < 0) {
    fprintf(stderr, "%s: %s='%s': expected ITER or ITER:RANK (0-based timed iteration)\n",
            PROGRAM, from, text);
    fail_exit(EXIT_ERROR);
  }
  o.corrupt_iter = it;
  o.corrupt_rank = rank;
  o.corrupt_from = from;
}

static Options parse_options(int argc, char** argv) {
  Options o;
  static struct option longs[] = {
      {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
      {"stepbytes", required_argument, 0, 'i'},  {"stepfactor", required_argument, 0, 'f'},
      {"ngpus", required_argument, 0, 'g'},      {"nthreads", required_argument, 0, 't'},
      {"iters", required_argument, 0, 'n'},      {"warmup_iters", required_argument, 0, 'w'},
      {"check", required_argument, 0, 'c'},      {"datatype", required_argument, 0, 'd'},
      {"op", required_argument, 0, 'o'},         {"root", required_argument, 0, 'r'},
      {"report_timestamps", required_argument, 0, 'S'},
      {"per_iter_timing", required_argument, 0, 'I'},
      {"run_cycles", required_argument, 0, 'N'}, {"timeout", required_argument, 0, 'T'},
      {"output_file", required_argument, 0, 'J'}, {"collective", required_argument, 0, 'X'},
      {"corrupt", required_argument, 0, 'Y'},    {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  const char* env_corrupt = getenv("R2B_VERIFY_CORRUPT");
  if (env_corrupt && *env_corrupt) parse_corrupt(o, env_corrupt, "R2B_VERIFY_CORRUPT");
  int c;
  while ((c = getopt_long(argc, argv, "b:e:i:f:g:t:n:w:c:d:o:r:S:I:N:T:J:h", longs, 0)) != -1) {
    switch (c) {
      case 'b': o.min_bytes = parse_size(optarg); break;
      case 'e': o.max_bytes = parse_size(optarg); break;
      case 'i': o.step_bytes = parse_size(optarg); break;
      case 'f': o.step_factor = parse_int(optarg, "-f"); break;
      case 'g':
        if (parse_int(optarg, "-g") != 1) usage_exit("-g must be 1: one GPU per process");
        break;
      case 't':
        if (parse_int(optarg, "-t") != 1) usage_exit("-t must be 1: one thread per process");
        break;
      case 'n': o.iters = parse_int(optarg, "-n"); break;
      case 'w': o.warmup = parse_int(optarg, "-w"); break;
      case 'c': o.check = parse_int(optarg, "-c"); break;
      case 'd':
        if (strcmp(optarg, "float") != 0 && strcmp(optarg, "float32") != 0)
          usage_exit("-d must be float: the inputs are small integers, exact in float");
        break;
      case 'o':
        if (strcmp(optarg, "sum") != 0) usage_exit("-o must be sum (the closed form is a sum)");
        break;
      case 'r': o.root = parse_int(optarg, "-r"); break;
      case 'S': o.timestamps = parse_int(optarg, "-S"); break;
      case 'I': o.per_iter = parse_int(optarg, "-I"); break;
      case 'N': o.cycles = parse_int(optarg, "-N"); break;
      case 'T': o.timeout_s = parse_int(optarg, "-T"); break;
      case 'J': o.json_path = optarg; break;
      case 'X': {
        int found = -1;
        for (int i = 0; i < 4; i++)
          if (strcmp(optarg, COLL_NAMES[i]) == 0) found = i;
        if (found < 0)
          usage_exit("--collective must be all_reduce, all_gather, reduce_scatter or broadcast");
        o.coll = (Coll)found;
        break;
      }
      case 'Y': parse_corrupt(o, optarg, "--corrupt"); break;
      case 'h':
        printf("usage: %s [--collective all_reduce|all_gather|reduce_scatter|broadcast] "
               "[nccl-tests flags -b -e -i -f -g 1 -t 1 -n -w -c -d float -o sum -r -S -I -N "
               "-T -J] [--corrupt ITER[:RANK]]\n", PROGRAM);
        exit(EXIT_OK);
      default: usage_exit("unknown flag (see --help)");
    }
  }
  if (optind < argc) usage_exit("unexpected argument (see --help)");
  if (o.min_bytes > o.max_bytes || o.iters < 1 || o.warmup < 0)
    usage_exit("invalid sizes or iterations (-b <= -e, -n >= 1, -w >= 0)");
  if (o.max_bytes / 4 >= (1ull << 31)) usage_exit("-e must be below 8G (32-bit element index)");
  return o;
}

// ------------------------------------------------------------------------------ kernels
// What one call's output must hold. all_reduce, reduce_scatter and broadcast outputs are all
// `a * ((i + off) mod PERIOD) + c` (reduce_scatter's `off` is shifted to the rank's chunk);
// all_gather's element i of chunk q is rank q's input, base(i - q * chunk) + q + 1.
struct Pattern {
  int gather, a, c;
  uint32_t off;    // all_gather: (k * STRIDE) mod PERIOD of the call
  uint32_t chunk;  // all_gather: per-rank element count
};

__device__ __forceinline__ int base_of(uint32_t j, uint32_t koff) {
  return (int)((j + koff) % PERIOD);
}

__device__ __forceinline__ float expected_at(const Pattern& p, uint32_t i) {
  if (p.gather) {
    uint32_t q = i / p.chunk;
    return (float)(base_of(i - q * p.chunk, p.off) + (int)q + 1);
  }
  return (float)(p.a * base_of(i, p.off) + p.c);
}

__global__ void fill_kernel(float* buf, uint32_t count, uint32_t koff, int rank) {
  for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < count;
       j += gridDim.x * blockDim.x)
    buf[j] = (float)(base_of(j, koff) + rank + 1);
}

// Mismatches among the four elements from i on (one modulo, then steps of one).
__device__ __forceinline__ uint32_t quad_wrong(float4 v, uint32_t i, const Pattern& p) {
  uint32_t b = (i + p.off) % PERIOD;
  uint32_t w = v.x != (float)(p.a * (int)b + p.c);
  b = b + 1 == PERIOD ? 0 : b + 1;
  w += v.y != (float)(p.a * (int)b + p.c);
  b = b + 1 == PERIOD ? 0 : b + 1;
  w += v.z != (float)(p.a * (int)b + p.c);
  b = b + 1 == PERIOD ? 0 : b + 1;
  return w + (v.w != (float)(p.a * (int)b + p.c));
}

// Counts the elements of out[0:count) that differ from the closed form: 16-byte streaming
// loads, four in flight per thread (the check is bound by reading the output once), one atomic
// per thread that found any (none in a correct run).
__global__ void check_kernel(const float* out, uint32_t count, Pattern p,
                             unsigned long long* wrong) {
  const int UNROLL = 4;
  uint32_t found = 0;
  uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
  uint32_t quads = p.gather ? 0 : count / 4;
  const float4* out4 = reinterpret_cast<const float4*>(out);
  uint32_t q = tid;
  for (; q + (UNROLL - 1) * stride < quads; q += UNROLL * stride) {
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) v[u] = __ldcs(out4 + q + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; u++) found += quad_wrong(v[u], (q + u * stride) * 4, p);
  }
  for (; q < quads; q += stride) found += quad_wrong(__ldcs(out4 + q), q * 4, p);
  for (uint32_t i = quads * 4 + tid; i < count; i += stride)  // all_gather, and the tail
    found += out[i] != expected_at(p, i);
  if (found) atomicAdd(wrong, (unsigned long long)found);
}

__global__ void corrupt_kernel(float* out, uint32_t index) { out[index] += 1.0f; }

// ------------------------------------------------------------------------------ helpers
static double wall_now() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double mono_now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// nccl-tests' getFloatStr: the most precise of %.2f/%.1f/%.0f that fits the width.
static std::string float_str(double v, int width) {
  char buf[64];
  for (int prec = 2; prec >= 0; prec--) {
    snprintf(buf, sizeof buf, "%*.*f", width, prec, v);
    if ((int)strlen(buf) <= width) return buf;
  }
  snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return std::string(buf).substr(0, width);
}

// The file the dynamic loader bound NCCL's symbols to: the library that serves this job, which
// LD_LIBRARY_PATH, an RPATH or LD_PRELOAD may make another than the one built against.
static std::string loaded_library() {
  Dl_info info;
  void* symbol = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr)
    return "an unknown file (dladdr found none)";
  return info.dli_fname;
}

static std::string version_text(int code) {
  char buf[64];
  if (code >= 10000)
    snprintf(buf, sizeof buf, "%d.%d.%d", code / 10000, (code % 10000) / 100, code % 100);
  else
    snprintf(buf, sizeof buf, "%d.%d.%d", code / 1000, (code % 1000) / 100, code % 100);
  return buf;
}

// Waits for the stream like nccl-tests' testStreamSynchronize: polls, surfaces NCCL's async
// errors, and gives up after -T seconds (the records read the `Test timeout` line).
static void wait_stream(cudaStream_t s, ncclComm_t comm, int timeout_s, int line) {
  double start = mono_now();
  while (true) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CUDACHECK(e);
    ncclResult_t nr;
    NCCLCHECK(ncclCommGetAsyncError(comm, &nr));
    if (nr != ncclSuccess && nr != ncclInProgress) {
      printf("%s: Test NCCL failure r2b_verify.cu:%d '%s'\n", g_host, line,
             ncclGetErrorString(nr));
      ncclCommAbort(comm);
      fail_exit(EXIT_ERROR);
    }
    if (timeout_s > 0 && mono_now() - start > timeout_s) {
      printf("%s: Test timeout (%ds) r2b_verify.cu:%d\n", g_host, timeout_s, line);
      ncclCommAbort(comm);
      fail_exit(EXIT_ERROR);
    }
    sched_yield();
  }
}

// Elements per rank of one call at `bytes` (nccl-tests' count rules) and the bus factor.
struct Shape {
  uint32_t in_count, out_count, param_count;
  size_t printed_bytes;
  double bus_factor;
};

static Shape shape_of(Coll coll, size_t bytes, int n) {
  uint32_t count = (uint32_t)(bytes / 4);
  Shape s;
  switch (coll) {
    case ALL_REDUCE:
      s = {count, count, count, (size_t)count * 4, 2.0 * (n - 1) / n};
      break;
    case ALL_GATHER: {
      uint32_t per = count / n;
      s = {per, per * n, per, (size_t)per * n * 4, (double)(n - 1) / n};
      break;
    }
    case REDUCE_SCATTER: {
      uint32_t per = count / n;
      s = {per * n, per, per, (size_t)per * n * 4, (double)(n - 1) / n};
      break;
    }
    default: s = {count, count, count, (size_t)count * 4, 1.0};
  }
  return s;
}

struct IterResult {  // one rank's part of one timed iteration
  double seconds, start, end, check_s;
  unsigned long long wrong;
};

struct Run {
  Options o;
  int rank, n;
  ncclComm_t comm;
  cudaStream_t stream;
  float *send, *recv;
  unsigned long long *d_wrong, *h_wrong;
  cudaEvent_t c0, c1, t_begin, t_end;
  int grid;
  long calls = 0;  // every collective call, warm-ups included: the input pattern's k

  void collective(const Shape& s) {
    switch (o.coll) {
      case ALL_REDUCE:
        NCCLCHECK(ncclAllReduce(send, recv, s.param_count, ncclFloat, ncclSum, comm, stream));
        break;
      case ALL_GATHER:
        NCCLCHECK(ncclAllGather(send, recv, s.param_count, ncclFloat, comm, stream));
        break;
      case REDUCE_SCATTER:
        NCCLCHECK(ncclReduceScatter(send, recv, s.param_count, ncclFloat, ncclSum, comm, stream));
        break;
      case BROADCAST:
        NCCLCHECK(ncclBroadcast(send, recv, s.param_count, ncclFloat, o.root, comm, stream));
        break;
    }
  }

  uint32_t koff(long k) const { return (uint32_t)((uint64_t)(k % PERIOD) * STRIDE % PERIOD); }

  Pattern pattern(const Shape& s, long k) const {
    int sum_c = n * (n + 1) / 2;
    uint32_t kk = koff(k);
    switch (o.coll) {
      case ALL_GATHER: return {1, 1, 0, kk, s.param_count};
      case REDUCE_SCATTER:
        return {0, n, sum_c, (uint32_t)((kk + (uint64_t)rank * s.param_count) % PERIOD), 0};
      case BROADCAST: return {0, 1, o.root + 1, kk, 0};
      default: return {0, n, sum_c, kk, 0};
    }
  }

  void fill(const Shape& s, long k) {
    if (s.in_count)
      fill_kernel<<<grid, 256, 0, stream>>>(send, s.in_count, koff(k), rank);
    CUDACHECK(cudaGetLastError());
    CUDACHECK(cudaStreamSynchronize(stream));
  }

  // One timed call; returns this rank's record (wrong is 0 and check_s -1 with -c 0).
  IterResult timed(const Shape& s, long iter) {
    long k = calls++;
    fill(s, k);
    g_ctrl.barrier();  // every rank launches together: no rank's time holds a wait for another
    IterResult r;
    // The iteration's time is the GPU's, between events around the collective (the host's
    // launch and polling latency left out, as nccl-tests' back-to-back loop amortizes it);
    // start/end are the host's wall clock around launch and observed completion.
    r.start = wall_now();
    double t0 = mono_now();
    CUDACHECK(cudaEventRecord(t_begin, stream));
    collective(s);
    CUDACHECK(cudaEventRecord(t_end, stream));
    wait_stream(stream, comm, o.timeout_s, __LINE__);
    r.end = r.start + (mono_now() - t0);
    float ms = 0;
    CUDACHECK(cudaEventElapsedTime(&ms, t_begin, t_end));
    r.seconds = ms / 1e3;
    int victim = o.corrupt_rank >= 0 ? o.corrupt_rank : n - 1;
    if (iter == o.corrupt_iter && rank == victim && s.out_count) {
      corrupt_kernel<<<1, 1, 0, stream>>>(recv, s.out_count / 2);  // the self-test
      CUDACHECK(cudaGetLastError());
    }
    r.wrong = 0;
    r.check_s = -1;
    if (o.check) {
      Pattern p = pattern(s, k);
      CUDACHECK(cudaEventRecord(c0, stream));
      CUDACHECK(cudaMemsetAsync(d_wrong, 0, sizeof *d_wrong, stream));
      if (s.out_count) check_kernel<<<grid, 256, 0, stream>>>(recv, s.out_count, p, d_wrong);
      CUDACHECK(cudaGetLastError());
      CUDACHECK(cudaEventRecord(c1, stream));
      CUDACHECK(cudaMemcpyAsync(h_wrong, d_wrong, sizeof *d_wrong, cudaMemcpyDeviceToHost,
                                stream));
      CUDACHECK(cudaStreamSynchronize(stream));
      float ms = 0;
      CUDACHECK(cudaEventElapsedTime(&ms, c0, c1));
      r.check_s = ms / 1e3;
      r.wrong = *h_wrong;
    }
    return r;
  }

  void warm(const Shape& s) {
    fill(s, calls++);
    collective(s);
    wait_stream(stream, comm, o.timeout_s, __LINE__);
  }
};

static std::string now_local() {
  char buf[32];
  time_t t = time(nullptr);
  struct tm tmv;
  localtime_r(&t, &tmv);
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tmv);
  return buf;
}

static void column_header(bool timestamps) {
  const char* lead = "# %10s  %12s  %8s  %6s  %6s";
  printf("#\n");
  printf(lead, "", "", "", "", "");
  printf("           out-of-place                       in-place          \n");
  const char* grp = "  %7s  %6s  %6s  %6s";
  printf(lead, "size", "count", "type", "redop", "root");
  printf(grp, "time", "algbw", "busbw", "#wrong");
  printf(grp, "time", "algbw", "busbw", "#wrong");
  printf(" %*s\n", timestamps ? 19 : 0, timestamps ? "timestamp" : "");
  printf(lead, "(B)", "(elements)", "", "", "");
  printf(grp, "(us)", "(GB/s)", "(GB/s)", "");
  printf(grp, "(us)", "(GB/s)", "(GB/s)", "");
  printf(" %*s\n", timestamps ? 19 : 0, timestamps ? "%Y-%m-%d %H:%M:%S" : "");
  fflush(stdout);
}

struct DevLine {
  int rank, pid, device;
  char host[64], bus[16], name[96];
};

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  gethostname(g_host, sizeof g_host - 1);
  Options o = parse_options(argc, argv);

#ifndef R2B_NO_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_ctrl.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_ctrl.nranks);
#else
  static const char* rank_vars[] = {"R2B_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                    "SLURM_PROCID", nullptr};
  static const char* size_vars[] = {"R2B_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                    "SLURM_NTASKS", nullptr};
  g_ctrl.rank = env_int(rank_vars, -1);
  g_ctrl.nranks = env_int(size_vars, -1);
  if (g_ctrl.rank < 0 || g_ctrl.nranks < 1 || !getenv("NCCL_COMM_ID"))
    usage_exit("built without MPI: set NCCL_COMM_ID=<rank 0 host:port>, R2B_RANK, R2B_NRANKS");
#endif
  const int rank = g_ctrl.rank, n = g_ctrl.nranks;
  if (o.root < 0 || o.root >= n) usage_exit("-r must name a rank");
  if (o.corrupt_rank >= n) usage_exit("the corrupted rank (ITER:RANK) must be a rank");

  // One GPU per process: the local rank among the processes of this host name (as nccl-tests
  // counts them), or the launcher's local rank where there is no MPI.
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 1) usage_exit("no CUDA device visible");
  int local = 0;
#ifndef R2B_NO_MPI
  {
    std::vector<char> hosts((size_t)n * 256);
    char mine[256] = {0};
    strncpy(mine, g_host, 255);
    g_ctrl.allgather(mine, hosts.data(), 256);
    for (int r = 0; r < rank; r++) local += strcmp(&hosts[(size_t)r * 256], mine) == 0;
  }
#else
  static const char* local_vars[] = {"R2B_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "SLURM_LOCALID", "LOCAL_RANK", nullptr};
  local = env_int(local_vars, 0);
#endif
  int device = local % ndev;
  CUDACHECK(cudaSetDevice(device));

  ncclUniqueId id;
  if (rank == 0 || getenv("NCCL_COMM_ID")) NCCLCHECK(ncclGetUniqueId(&id));
#ifndef R2B_NO_MPI
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, n, id, rank));
  cudaStream_t stream;
  CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  g_ctrl.comm = comm;
  g_ctrl.stream = stream;

  int lib_version = 0;
  NCCLCHECK(ncclGetVersion(&lib_version));

  cudaDeviceProp prop;
  CUDACHECK(cudaGetDeviceProperties(&prop, device));
  DevLine me = {};
  me.rank = rank;
  me.pid = (int)getpid();
  me.device = device;
  strncpy(me.host, g_host, sizeof me.host - 1);
  snprintf(me.bus, sizeof me.bus, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID,
           prop.pciDeviceID);
  strncpy(me.name, prop.name, sizeof me.name - 1);
  std::vector<DevLine> devs(n);
  g_ctrl.allgather(&me, devs.data(), sizeof me);

  const char* coll = COLL_NAMES[o.coll];
  int victim = o.corrupt_rank >= 0 ? o.corrupt_rank : n - 1;
  if (rank == 0) {
    printf("# r2bench verification workload %s %s (not nccl-tests): %s, every element of every "
           "timed iteration checked on the GPU on every rank against a closed form; "
           "NCCL version %s (library %d, headers %d)\n",
           PROGRAM, R2B_VERIFY_VERSION, coll, version_text(lib_version).c_str(), lib_version,
           NCCL_VERSION_CODE);
    printf("# r2bench verification workload: loaded NCCL from %s\n", loaded_library().c_str());
    printf("# Collective test starting: %s_%s_perf\n", PROGRAM, coll);
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: ", o.min_bytes, o.max_bytes);
    if (o.step_factor > 1) printf("%d(factor)", o.step_factor);
    else printf("%zu(bytes)", o.step_bytes);
    // Each result row is ONE timed iteration (iters: 1 per row); -n gives the rows per size.
    printf(" warmup iters: %d iters: 1 agg iters: 1 validation: %d graph: 0 unalign: 0\n",
           o.warmup, o.check ? 1 : 0);
    printf("# Rows: one per timed iteration (%d per size), out-of-place; in-place not run (N/A). "
           "#iter lines: one JSON record per timed iteration (start/end: rank 0's wall clock, "
           "unix s)\n", o.iters);
    if (!o.json_path.empty())
      printf("# -J %s: not written (the per-iteration records are the #iter lines)\n",
             o.json_path.c_str());
    if (!o.check) printf("# Check off (-c 0): results NOT verified (timing only)\n");
    if (o.corrupt_iter >= 0)
      printf("# Self-test: timed iteration %ld is corrupted on purpose on rank %d (%s): this run "
             "must end with wrong results\n", o.corrupt_iter, victim, o.corrupt_from);
    printf("#\n# Using devices\n");
    for (auto& d : devs)
      printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", d.rank, d.pid, d.host,
             d.device, d.bus, d.name);
    column_header(o.timestamps != 0);
  }

  size_t max_count = o.max_bytes / 4;
  Run run;
  run.o = o;
  run.rank = rank;
  run.n = n;
  run.comm = comm;
  run.stream = stream;
  CUDACHECK(cudaMalloc(&run.send, (max_count ? max_count : 1) * 4));
  CUDACHECK(cudaMalloc(&run.recv, (max_count ? max_count : 1) * 4));
  CUDACHECK(cudaMalloc(&run.d_wrong, sizeof(unsigned long long)));
  CUDACHECK(cudaMallocHost(&run.h_wrong, sizeof(unsigned long long)));
  CUDACHECK(cudaEventCreate(&run.c0));
  CUDACHECK(cudaEventCreate(&run.c1));
  CUDACHECK(cudaEventCreate(&run.t_begin));
  CUDACHECK(cudaEventCreate(&run.t_end));
  run.grid = prop.multiProcessorCount * 8;

  // Warm-up: every power of two from -b to -e, as nccl-tests (not timed, not checked).
  for (size_t b = o.min_bytes; b <= o.max_bytes && o.warmup > 0; b = b ? b * 2 : 1)
    for (int w = 0; w < o.warmup; w++) run.warm(shape_of(o.coll, b, n));

  long iter = 0, wrong_iters = 0;
  unsigned long long wrong_total = 0, max_elements = 0;
  double bw_sum = 0;
  long bw_rows = 0;
  std::vector<long> wrong_list;
  std::vector<IterResult> all(n);
  for (int cycle = 0; o.cycles <= 0 || cycle < o.cycles; cycle++) {
    for (size_t b = o.min_bytes; b <= o.max_bytes;) {
      Shape s = shape_of(o.coll, b, n);
      if (s.out_count > max_elements) max_elements = s.out_count;
      for (int i = 0; i < o.iters; i++, iter++) {
        IterResult mine = run.timed(s, iter);
        g_ctrl.allgather(&mine, all.data(), sizeof mine);  // outside the timed part
        if (rank != 0) continue;
        double mean = 0, check_max = -1;
        unsigned long long wrong = 0;
        for (auto& r : all) {
          mean += r.seconds / n;
          wrong += r.wrong;
          if (r.check_s > check_max) check_max = r.check_s;
        }
        double algbw = mean > 0 ? (double)s.printed_bytes / 1e9 / mean : 0;
        double busbw = algbw * s.bus_factor;
        bw_sum += busbw;
        bw_rows++;
        if (wrong) {
          wrong_iters++;
          wrong_total += wrong;
          wrong_list.push_back(iter);
        }
        char wrong_json[32], check_json[32];
        snprintf(wrong_json, sizeof wrong_json, o.check ? "%llu" : "null", wrong);
        if (o.check) snprintf(check_json, sizeof check_json, "%.9f", check_max);
        else snprintf(check_json, sizeof check_json, "null");
        printf("#iter {\"iter\": %ld, \"cycle\": %d, \"size\": %zu, \"start\": %.6f, "
               "\"end\": %.6f, \"seconds\": %.9f, \"check_s\": %s, \"wrong\": %s, "
               "\"elements\": %u, \"ranks\": %d}\n",
               iter, cycle, s.printed_bytes, all[0].start, all[0].end, mean, check_json,
               wrong_json, s.out_count, n);
        char wrong_col[32];
        if (o.check) snprintf(wrong_col, sizeof wrong_col, "%6g", (double)wrong);
        else snprintf(wrong_col, sizeof wrong_col, "%6s", "N/A");
        bool rooted = o.coll == BROADCAST;
        bool reduces = o.coll == ALL_REDUCE || o.coll == REDUCE_SCATTER;
        printf("%12zu  %12u  %8s  %6s  %6d  %7s  %6s  %6s  %s  %7s  %6s  %6s  %6s",
               s.printed_bytes, s.param_count, "float", reduces ? "sum" : "none",
               rooted ? o.root : -1, float_str(mean * 1e6, 7).c_str(),
               float_str(algbw, 6).c_str(), float_str(busbw, 6).c_str(), wrong_col, "N/A",
               "N/A", "N/A", "N/A");
        if (o.timestamps) printf("  %19s", now_local().c_str());
        printf("\n");
      }
      b = o.step_factor > 1 ? b * o.step_factor : b + o.step_bytes;
      if (b == 0) break;
    }
  }

  int code = EXIT_OK;
  if (rank == 0) {
    printf("# %-20s : %ld %s\n", "Out of bounds values", wrong_iters, wrong_iters ? "FAILED" : "OK");
    printf("# %-20s : %g \n", "Avg bus bandwidth", bw_rows ? bw_sum / bw_rows : 0.0);
    printf("#\n");
    std::string list;
    for (size_t i = 0; i < wrong_list.size(); i++)
      list += (i ? ", " : "") + std::to_string(wrong_list[i]);
    if (o.check)
      printf("# Verification: every element of each of the %ld timed iterations checked on all "
             "%d ranks (up to %llu elements per rank): %llu wrong%s%s%s\n",
             iter, n, max_elements, wrong_total, wrong_list.empty() ? "" : " in iterations [",
             list.c_str(), wrong_list.empty() ? "" : "]");
    else
      printf("# Verification: off (-c 0): none of the %ld timed iterations was checked\n", iter);
    printf("#verify {\"program\": \"%s\", \"version\": \"%s\", \"collective\": \"%s\", "
           "\"checked\": %s, \"ranks\": %d, \"iterations\": %ld, \"elements\": %llu, "
           "\"wrong\": %llu, \"wrong_iterations\": [%s], \"nccl_version\": %d}\n",
           PROGRAM, R2B_VERIFY_VERSION, coll, o.check ? "true" : "false", n, iter, max_elements,
           wrong_total, list.c_str(), lib_version);
    printf("# Collective test concluded: %s_%s_perf\n#\n", PROGRAM, coll);
    fflush(stdout);
  }
  // Every rank exits with the same code: rank 0's verdict.
  int verdict = wrong_total ? EXIT_WRONG : EXIT_OK;
  int verdicts_local = verdict;
  std::vector<int> verdicts(n);
  g_ctrl.allgather(&verdicts_local, verdicts.data(), sizeof(int));
  code = verdicts[0];

  CUDACHECK(cudaStreamSynchronize(stream));
  ncclCommDestroy(comm);
  cudaFree(run.send);
  cudaFree(run.recv);
#ifndef R2B_NO_MPI
  MPI_Finalize();
#endif
  return code;
}
