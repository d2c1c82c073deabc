/*
 * hcoll — a standalone collective-communication runtime with a stable C ABI.
 *
 * C99 header; it includes neither mpi.h nor any CUDA header. Every numeric value in this file is
 * part of the ABI and never changes. Structs that may grow start with a `mask` whose bits say which
 * fields the caller set; new fields are only ever appended, each with a new bit.
 *
 * Conventions for every function below:
 *  - Return value: HCOLL_SUCCESS (0), a positive state, or a negative error. On a negative return,
 *    hcoll_last_error() holds a message for the calling thread and nothing was enqueued or changed.
 *  - No function blocks unless its comment says so. Collectives return at once with a request.
 *  - Memory passed in stays owned by the caller. Tensor data given to a collective must stay valid
 *    and untouched until its request completes.
 */
#ifndef HCOLL_HCOLL_H_
#define HCOLL_HCOLL_H_

#include <stddef.h>
#include <stdint.h>

#include "hcoll/config.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define HCOLL_API
#else
#define HCOLL_API __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Status codes: 0 ok, >0 a state, <0 an error. The X-macro keeps codes and strings in step.      */
/* ---------------------------------------------------------------------------------------------- */
#define HCOLL_STATUS_MAP(XX)                                                              \
  XX(SUCCESS, 0, "success")                                                               \
  XX(IN_PROGRESS, 1, "operation in progress")                                             \
  XX(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                        \
  XX(ERR_INVALID_HANDLE, -2, "invalid handle")                                            \
  XX(ERR_NOT_INITIALIZED, -3, "hcoll is not initialized")                                 \
  XX(ERR_MISMATCH, -4, "ranks disagreed about an operation")                              \
  XX(ERR_DUPLICATE_NAME, -5, "an operation with this name is already in flight")          \
  XX(ERR_NOT_MEMBER, -6, "calling rank is not a member of the communicator")              \
  XX(ERR_UNSUPPORTED, -7, "unsupported")                                                  \
  XX(ERR_TIMEOUT, -8, "timed out")                                                        \
  XX(ERR_SHUT_DOWN, -9, "hcoll or the communicator was shut down")                        \
  XX(ERR_BACKEND, -10, "communication backend failed")                                    \
  XX(ERR_NO_MEMORY, -11, "out of memory")                                                 \
  XX(ERR_INTERNAL, -12, "internal error")

typedef enum {
#define HCOLL_STATUS_ENUM_(name, value, text) HCOLL_##name = value,
  HCOLL_STATUS_MAP(HCOLL_STATUS_ENUM_) /* C99 allows the trailing comma */
#undef HCOLL_STATUS_ENUM_
} hcoll_status_t;

/* Element types. HCOLL_BOOL is one byte per element, 0 = false, any other value = true. */
typedef enum {
  HCOLL_UINT8 = 0,
  HCOLL_INT8 = 1,
  HCOLL_UINT16 = 2,
  HCOLL_INT16 = 3,
  HCOLL_INT32 = 4,
  HCOLL_INT64 = 5,
  HCOLL_FLOAT16 = 6,
  HCOLL_BFLOAT16 = 7,
  HCOLL_FLOAT32 = 8,
  HCOLL_FLOAT64 = 9,
  HCOLL_BOOL = 10
} hcoll_dtype_t;

/* Reduction operators. AVERAGE is SUM followed by a multiplication with 1/N.
 * ADASUM is Horovod's adaptive summation (Maleki et al., MLSys 2021): the pairwise
 * adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b applied over a fixed tree of the
 * ranks (docs/api.md), per tensor also in a grouped call (dot products never span tensors).
 * Allreduce only (reducescatter: HCOLL_ERR_INVALID_ARGUMENT), host memory only (a CUDA tensor:
 * HCOLL_ERR_UNSUPPORTED), float16/bfloat16/float32/float64 only (any other dtype:
 * HCOLL_ERR_INVALID_ARGUMENT). prescale multiplies each input before the reduction and postscale
 * the result, as for SUM. A zero vector is the identity (adasum(a, 0) = a), so a joined rank's
 * zeros leave the result of the others unchanged. Every rank gets bitwise the same result. */
typedef enum {
  HCOLL_SUM = 0,
  HCOLL_AVERAGE = 1,
  HCOLL_MIN = 2,
  HCOLL_MAX = 3,
  HCOLL_PRODUCT = 4,
  HCOLL_ADASUM = 5
} hcoll_reduce_op_t;

#define HCOLL_DEVICE_HOST (-1)
#define HCOLL_UNDEFINED (-32766) /* color for hcoll_comm_split: the caller is not a member */
#define HCOLL_MAX_NDIM 32        /* tensors have at most this many dimensions */

typedef struct hcoll_comm_s* hcoll_comm_t;       /* opaque communicator handle */
typedef struct hcoll_request_s* hcoll_request_t; /* opaque request handle */
#define HCOLL_COMM_NULL ((hcoll_comm_t)0)
#define HCOLL_REQUEST_NULL ((hcoll_request_t)0)

/* A tensor: a dense, C-contiguous array. `shape` has `ndim` entries (may be NULL when ndim == 0,
 * a scalar). `data` may be NULL only when the tensor has no elements. */
typedef struct hcoll_tensor {
  void* data;
  hcoll_dtype_t dtype;
  int32_t ndim;
  const int64_t* shape;
  int32_t device; /* HCOLL_DEVICE_HOST or a CUDA ordinal */
  void* stream;   /* cudaStream_t the data is ordered on (CUDA only; NULL = default stream) */
} hcoll_tensor_t;
/* CUDA tensors: `data` must be memory of `device` (cudaMalloc'ed there, or pinned/managed memory);
 * ordinary host memory or another device's memory fails the call with INVALID_ARGUMENT. The
 * collective reads what was enqueued on `stream` before the call. As in Horovod, the input must
 * not be written, nor the output read, on any stream until the request completes (hcoll_test and
 * hcoll_wait report device completion): the collective runs on an internal stream once every rank
 * has submitted it, after work enqueued on `stream` in the meantime. */

/* Output allocator. `alloc` returns `bytes` bytes usable on `device` (ordered on `stream` for CUDA)
 * or NULL on failure (the operation then fails with HCOLL_ERR_NO_MEMORY). Memory obtained through
 * it belongs to the user: hcoll never frees it, `free` is called only for buffers hcoll allocated
 * but could not hand out (an operation that failed after its outputs were allocated, or whose
 * request was freed while it was still in flight). */
typedef void* (*hcoll_alloc_fn)(void* ctx, int32_t device, void* stream, size_t bytes);
typedef void (*hcoll_free_fn)(void* ctx, int32_t device, void* ptr);

#define HCOLL_INIT_FIELD_MPI_COMM (UINT64_C(1) << 0)  /* mpi_comm is set */
#define HCOLL_INIT_FIELD_ALLOCATOR (UINT64_C(1) << 1) /* alloc, free and alloc_ctx are set */
#define HCOLL_INIT_FIELD_BACKEND (UINT64_C(1) << 2)   /* backend and local_ranks are set */

typedef struct hcoll_init_params {
  uint64_t mask; /* HCOLL_INIT_FIELD_* bits: which fields below are set */
  int mpi_comm;  /* Fortran handle (MPI_Comm_c2f) of the world; default MPI_COMM_WORLD */
  hcoll_alloc_fn alloc;
  hcoll_free_fn free;
  void* alloc_ctx; /* passed back to alloc and free */
  /* The host backend: "mpi" (one rank per process, started by mpiexec; the default) or
   * "loopback" (every rank in this process, one thread per rank, over shared memory: for tests
   * and single-node tools). NULL: HCOLL_BACKEND, else "mpi". */
  const char* backend;
  /* Ranks this process hosts: loopback's world size (0: HCOLL_LOOPBACK_SIZE, else 1); must be
   * 0 or 1 for mpi. Each hosted rank is driven through its own world handle
   * (hcoll_comm_world_of). */
  int32_t local_ranks;
} hcoll_init_params_t;

#define HCOLL_COMM_STATS_FIELD_CYCLES (UINT64_C(1) << 0)
#define HCOLL_COMM_STATS_FIELD_SLOW_PATH (UINT64_C(1) << 1)
#define HCOLL_COMM_STATS_FIELD_CACHE_HITS (UINT64_C(1) << 2)
#define HCOLL_COMM_STATS_FIELD_BACKEND_CALLS (UINT64_C(1) << 3)
#define HCOLL_COMM_STATS_FIELD_FUSED_TENSORS (UINT64_C(1) << 4)
#define HCOLL_COMM_STATS_FIELD_BYTES (UINT64_C(1) << 5)
#define HCOLL_COMM_STATS_FIELD_QUEUE_DEPTH (UINT64_C(1) << 6)
#define HCOLL_COMM_STATS_FIELD_CALLER_ROUNDS (UINT64_C(1) << 7)
#define HCOLL_COMM_STATS_FIELD_FOLDED (UINT64_C(1) << 8)
#define HCOLL_COMM_STATS_FIELD_ALL (UINT64_C(0x1ff))

/* Counters of one communicator since its creation (this rank's view). */
typedef struct hcoll_comm_stats {
  uint64_t mask;                    /* [in] HCOLL_COMM_STATS_FIELD_* bits to fill */
  uint64_t cycles;                  /* negotiation rounds run */
  uint64_t slow_path_negotiations;  /* rounds that went through the coordinator */
  uint64_t cache_hits;              /* operations scheduled from the response cache */
  uint64_t backend_calls;           /* collective calls issued to a backend */
  uint64_t fused_tensors;           /* tensors that shared a backend call with another */
  uint64_t bytes;                   /* payload bytes moved through backend calls */
  uint64_t queue_depth;             /* operations submitted and not yet completed, now */
  uint64_t caller_rounds;           /* of `cycles`, rounds a waiting caller's thread ran
                                       (caller progress, HCOLL_CALLER_PROGRESS) */
  uint64_t folded;                  /* collectives whose data moved with their round's readiness
                                       exchange (the small-message fold: no data-plane call) */
} hcoll_comm_stats_t;

/* Options of one collective call: the last argument of every *_into function (NULL = defaults).
 * Mask-first, like hcoll_init_params_t: the library reads only the fields whose HCOLL_OP_FIELD_*
 * bit is set and refuses bits it does not know (INVALID_ARGUMENT), so a caller built against a
 * newer header learns at once that this library lacks an option. New options (timeouts,
 * priorities, flags) are only ever appended, each with a new bit: no new entry points. This
 * version defines none; pass NULL or a struct with mask 0. */
typedef struct hcoll_op_options {
  uint64_t mask; /* HCOLL_OP_FIELD_* bits: which fields below are set (none defined yet) */
} hcoll_op_options_t;

/* ---------------------------------------------------------------------------------------------- */
/* Lifecycle and information                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* Initializes hcoll. Blocks; collective over the world communicator.
 * [in] params: NULL for defaults; otherwise only fields whose mask bit is set are read.
 * If MPI is not initialized, hcoll initializes it with MPI_THREAD_MULTIPLE and finalizes it when
 * the process exits (MPI cannot be re-initialized, so a later hcoll_initialize reuses it); if the
 * application initialized MPI, it must have provided MPI_THREAD_MULTIPLE and keeps ownership.
 * Reads the HCOLL_* environment variables; a malformed value fails with INVALID_ARGUMENT. The
 * settings that change what ranks send or how they match (HCOLL_FUSION_THRESHOLD,
 * HCOLL_CACHE_CAPACITY, HCOLL_STALL_SHUTDOWN_TIME_SECONDS, the library version) are compared over
 * the world: if they differ, initialize fails on every rank with INVALID_ARGUMENT naming the
 * variable, the values and the ranks.
 * The backend (params->backend, else HCOLL_BACKEND, else "mpi") decides where ranks live: the
 * loopback backend hosts every rank in this process and initializes no MPI.
 * Returns SUCCESS, INVALID_ARGUMENT (already initialized, bad params, bad environment, settings
 * that differ across ranks, a backend this build lacks), UNSUPPORTED (MPI thread level too low; another MPI than
 * hcoll_mpi_version() is loaded in the process), BACKEND. */
HCOLL_API hcoll_status_t hcoll_initialize(const hcoll_init_params_t* params);

/* Shuts hcoll down. Blocks until every communicator's thread has stopped. Bounded: this rank's
 * leave is announced to the peers of every communicator (their operations this rank never
 * submitted fail with SHUT_DOWN naming it; idle peers join its last round), and peers that do not
 * answer are given up on after min(stall shutdown time, 30 s). A process that exits without
 * calling it shuts down the same way from an exit handler. Operations still
 * pending complete with HCOLL_ERR_SHUT_DOWN, which hcoll_test/hcoll_wait report: request handles
 * stay valid until freed, communicator handles become invalid. hcoll_initialize may follow.
 * Returns SUCCESS or NOT_INITIALIZED. */
HCOLL_API hcoll_status_t hcoll_shutdown(void);

/* Returns 1 if hcoll is initialized, else 0. */
HCOLL_API int hcoll_is_initialized(void);

/* [out] major, minor, patch: the version of the library loaded at run time (HCOLL_VERSION_* are
 * the header's); each may be NULL. Never named hcoll_get_version: NVIDIA's unrelated HCOLL exports
 * `const char* hcoll_get_version(void)`, which Open MPI calls. Returns SUCCESS. */
HCOLL_API hcoll_status_t hcoll_version(int* major, int* minor, int* patch);

/* Returns the loaded library's version as a static string, "major.minor.patch" (never NULL). */
HCOLL_API const char* hcoll_version_string(void);

/* Returns a static string describing `status` (never NULL; "unknown status" for other values). */
HCOLL_API const char* hcoll_status_string(hcoll_status_t status);

/* Returns the message of the calling thread's last failed call ("" if none). The pointer stays
 * valid until the thread's next failing hcoll call. */
HCOLL_API const char* hcoll_last_error(void);

/* Returns 1 if this library was built with the NCCL backend, else 0. */
HCOLL_API int hcoll_nccl_built(void);

/* Returns the version of NCCL this library was built against as NCCL_VERSION_CODE computes it
 * (e.g. 22809 for 2.28.9, 2708 for 2.7.8), or 0 without the NCCL backend. Static; no NCCL call. */
HCOLL_API int hcoll_nccl_version(void);

/* Starts writing this process's timeline (the Chrome-trace JSON of HCOLL_TIMELINE, same per-rank
 * file names: "%r" in `path` becomes the rank, else ".<rank>" is appended when there are several
 * ranks) from now on. A timeline being written is finished first (a valid JSON file), so calling
 * it again switches files. Local, not collective; does not block on other ranks.
 * [in] path: the file (not NULL, not empty, not a directory).
 * Returns SUCCESS, INVALID_ARGUMENT (bad path, file cannot be opened: nothing changes),
 * NOT_INITIALIZED. */
HCOLL_API hcoll_status_t hcoll_start_timeline(const char* path);

/* Stops the timeline: its file is finished (valid JSON) and closed; nothing is recorded until the
 * next hcoll_start_timeline. SUCCESS also when none was being written. Returns SUCCESS,
 * NOT_INITIALIZED. Local, not collective. */
HCOLL_API hcoll_status_t hcoll_stop_timeline(void);

/* Returns the MPI this library was built against, e.g. "MPICH 4.0.2" (static; no MPI call). One
 * process can use only one MPI: hcoll_initialize fails with UNSUPPORTED, before calling MPI, when
 * the process has loaded another one (e.g. Open MPI through mpi4py against an MPICH build). */
HCOLL_API const char* hcoll_mpi_version(void);

/* Ends the whole job, like ncclCommAbort followed by MPI_Abort: logs `reason` (may be NULL),
 * tells the peers of every communicator that this rank aborts (best effort, about a second at
 * most; their pending operations fail with SHUT_DOWN naming this rank if they see it before the
 * launcher ends them), then calls MPI_Abort on the world (or _exit(1) without MPI). Never
 * returns; works whether hcoll is initialized or not. */
HCOLL_API void hcoll_abort(const char* reason);

/* ---------------------------------------------------------------------------------------------- */
/* Communicators. Creation and destruction are collective over the parent's members and block;    */
/* they work while other communicators have operations in flight.                                 */
/* ---------------------------------------------------------------------------------------------- */

/* [out] comm: the world communicator (owned by the runtime; destroying it is an error).
 * Returns SUCCESS, INVALID_ARGUMENT, NOT_INITIALIZED. */
HCOLL_API hcoll_status_t hcoll_comm_world(hcoll_comm_t* comm);

/* [out] comm: the world communicator as seen by world rank `rank`, which this process must host:
 * with one rank per process (mpi) that is its own rank, and the handle is hcoll_comm_world's;
 * with several (loopback, HCOLL_INIT_FIELD_BACKEND) any rank in [0, local ranks), each driven by
 * its own thread: collectives on it act as that rank. hcoll_comm_world gives rank 0's there.
 * Returns SUCCESS, INVALID_ARGUMENT (comm NULL, a rank this process does not host),
 * NOT_INITIALIZED. */
HCOLL_API hcoll_status_t hcoll_comm_world_of(int rank, hcoll_comm_t* comm);

/* Splits `parent` like MPI_Comm_split: ranks with the same color form a communicator, ordered by
 * key then parent rank. color HCOLL_UNDEFINED (or any negative color) gives *out = NULL. Blocks.
 * A rank with bad arguments (out NULL) still takes part: it gets INVALID_ARGUMENT and the other
 * ranks get MISMATCH naming it, instead of waiting for it forever.
 * Returns SUCCESS, INVALID_ARGUMENT, MISMATCH, INVALID_HANDLE, NOT_INITIALIZED, SHUT_DOWN, BACKEND. */
HCOLL_API hcoll_status_t hcoll_comm_split(hcoll_comm_t parent, int color, int key,
                                          hcoll_comm_t* out);

/* Creates a communicator of the parent ranks `ranks[0..n)`; new rank i is parent rank ranks[i].
 * Every parent member must call with the same list; callers outside it get *out = NULL. Blocks.
 * Returns SUCCESS, INVALID_ARGUMENT (NULL, n < 1, duplicates, out of range), MISMATCH (the lists
 * differ across ranks, on every rank; or only some ranks passed bad arguments: those get
 * INVALID_ARGUMENT, the others MISMATCH naming them), INVALID_HANDLE, NOT_INITIALIZED, SHUT_DOWN,
 * BACKEND. */
HCOLL_API hcoll_status_t hcoll_comm_create(hcoll_comm_t parent, const int* ranks, int n,
                                           hcoll_comm_t* out);

/* Wraps a duplicate of the MPI communicator whose Fortran handle is `mpi_comm_fint` (e.g. mpi4py's
 * comm.py2f()). Collective over that MPI communicator; blocks. The caller keeps its communicator.
 * Returns SUCCESS, INVALID_ARGUMENT (not a communicator), NOT_MEMBER (MPI_COMM_NULL: a rank left
 * out of an MPI_Comm_split/create), NOT_INITIALIZED, BACKEND. */
HCOLL_API hcoll_status_t hcoll_comm_from_mpi(int mpi_comm_fint, hcoll_comm_t* out);

/* Destroys `comm` once its in-flight operations have drained: operations every rank had submitted
 * when the first member closed complete normally, the rest fail with SHUT_DOWN (on the other
 * members too, with a message naming the rank that closed; their later submissions fail with
 * SHUT_DOWN). Collective; blocks (bounded, as hcoll_shutdown). The handle becomes invalid.
 * Returns SUCCESS, INVALID_HANDLE, INVALID_ARGUMENT (the world communicator), NOT_INITIALIZED. */
HCOLL_API hcoll_status_t hcoll_comm_destroy(hcoll_comm_t comm);

/* Sets the stall shutdown time of `comm` (seconds; 0 = never): an operation some members submitted
 * and others did not within it, or a collective that does not complete within it, fails with
 * TIMEOUT on every member and the communicator becomes unusable (SHUT_DOWN). The default is
 * HCOLL_STALL_SHUTDOWN_TIME_SECONDS (600). Collective over comm's members, who must pass the
 * same value; blocks. Returns SUCCESS, INVALID_ARGUMENT (not in [0, 1e6]; the other members then
 * get MISMATCH), MISMATCH (members passed different values: on every member, the timeout is
 * unchanged), INVALID_HANDLE, NOT_INITIALIZED, SHUT_DOWN, TIMEOUT. */
HCOLL_API hcoll_status_t hcoll_comm_set_timeout(hcoll_comm_t comm, double seconds);

/* [out] out: this process's rank in comm / the size of comm / the rank among the members on this
 * node / the number of members on this node. Returns SUCCESS, INVALID_ARGUMENT, INVALID_HANDLE,
 * NOT_INITIALIZED (before hcoll_initialize or after hcoll_shutdown, whatever the handle). */
HCOLL_API hcoll_status_t hcoll_comm_rank(hcoll_comm_t comm, int* out);
HCOLL_API hcoll_status_t hcoll_comm_size(hcoll_comm_t comm, int* out);
HCOLL_API hcoll_status_t hcoll_comm_local_rank(hcoll_comm_t comm, int* out);
HCOLL_API hcoll_status_t hcoll_comm_local_size(hcoll_comm_t comm, int* out);

/* [in,out] stats: fills the fields selected by stats->mask. Returns SUCCESS, INVALID_ARGUMENT,
 * INVALID_HANDLE, NOT_INITIALIZED (before hcoll_initialize or after hcoll_shutdown). */
HCOLL_API hcoll_status_t hcoll_comm_stats(hcoll_comm_t comm, hcoll_comm_stats_t* stats);

/* ---------------------------------------------------------------------------------------------- */
/* Collectives. All are non-blocking: they validate, enqueue and return a request in *req.        */
/* `name` (copied; NULL = "<op>.<n>" by this communicator's call order) matches the operation     */
/* across ranks whatever order each rank submits in. Tensor descriptors (and shapes) are copied;  */
/* the data they point to must stay valid until the request completes.                            */
/* Synchronous errors: INVALID_ARGUMENT, INVALID_HANDLE, NOT_INITIALIZED, DUPLICATE_NAME,        */
/* SHUT_DOWN, UNSUPPORTED (e.g. a CUDA tensor without the NCCL backend; an allgather or          */
/* alltoall part over INT_MAX bytes, or a reducescatter over INT_MAX elements, when the MPI      */
/* lacks MPI-4 large counts, as Open MPI 4.1 does). Asynchronous errors (from hcoll_test or      */
/* hcoll_wait, on every rank): MISMATCH, TIMEOUT, SHUT_DOWN, BACKEND, and UNSUPPORTED when,      */
/* without MPI-4 large counts, an allgather output or an alltoall receive total assembled from   */
/* all ranks exceeds INT_MAX bytes.                                                              */
/* ---------------------------------------------------------------------------------------------- */

/* Reduces `in` over all ranks into `out` (same dtype and shape; may alias `in`). Each element is
 * multiplied by `prescale` before and by `postscale` after the reduction (AVERAGE adds 1/N).
 * Integers are scaled in double and truncated. float16/bfloat16 SUM/AVERAGE/PRODUCT of host
 * tensors accumulate in float32 and are rounded to 16 bits once, after the reduction (before
 * postscale); CUDA tensors (NCCL) are rounded to 16 bits at each reduction step. For bool,
 * SUM/MAX are OR and MIN/PRODUCT are AND; scaling or AVERAGE of bool is INVALID_ARGUMENT.
 * Every rank gets the same result: floating-point MIN/MAX of host tensors are NaN if any input
 * is NaN and order -0 below +0, whatever order the ranks' values are combined in.
 * HCOLL_ADASUM (see hcoll_reduce_op_t): floating host tensors only, each tensor of a grouped
 * call reduced on its own; errors at submission: INVALID_ARGUMENT (other dtype), UNSUPPORTED
 * (CUDA tensor). */
HCOLL_API hcoll_status_t hcoll_allreduce(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* in, const hcoll_tensor_t* out,
                                         hcoll_reduce_op_t op, double prescale, double postscale,
                                         hcoll_request_t* req);

/* Allreduce of n tensors negotiated, executed and fused as one unit; one request. */
HCOLL_API hcoll_status_t hcoll_grouped_allreduce(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* ins,
                                                 const hcoll_tensor_t* outs, hcoll_reduce_op_t op,
                                                 double prescale, double postscale,
                                                 hcoll_request_t* req);

/* Concatenates every rank's `in` along dim 0 in rank order into output 0 of the request. Ranks
 * agree on dtype, ndim (>= 1) and dims[1:]; dim 0 may differ (0 included). */
HCOLL_API hcoll_status_t hcoll_allgather(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* in, hcoll_request_t* req);

/* Allgather of n tensors as one unit; output i belongs to ins[i]. */
HCOLL_API hcoll_status_t hcoll_grouped_allgather(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* ins, hcoll_request_t* req);

/* Replaces every rank's `buf` with root's (in place). Ranks agree on dtype, shape and root. */
HCOLL_API hcoll_status_t hcoll_broadcast(hcoll_comm_t comm, const char* name,
                                         const hcoll_tensor_t* buf, int root,
                                         hcoll_request_t* req);

/* Broadcast of n tensors from one root as one unit. */
HCOLL_API hcoll_status_t hcoll_grouped_broadcast(hcoll_comm_t comm, const char* name, int n,
                                                 const hcoll_tensor_t* bufs, int root,
                                                 hcoll_request_t* req);

/* Sends splits[i] rows (dim 0) of `in` to rank i; splits has N entries >= 0 summing to <= dim0
 * (trailing rows ignored), NULL = dim0 / N rows each (dim0 % N must be 0). The call reads
 * exactly N = communicator-size entries and cannot see the array's length: a shorter array is
 * undefined behaviour (bindings that know the length check it). Output 0 holds the rows
 * from rank 0, then 1, ...; hcoll_request_received_splits gives how many came from each rank. */
HCOLL_API hcoll_status_t hcoll_alltoall(hcoll_comm_t comm, const char* name,
                                        const hcoll_tensor_t* in, const int64_t* splits,
                                        hcoll_request_t* req);

/* Reduces `in` (identical shape on all ranks, ndim >= 1) and gives rank r rows
 * [off_r, off_r + c_r) as output 0, with c_r = floor(d0/N) + (r < d0 mod N). */
HCOLL_API hcoll_status_t hcoll_reducescatter(hcoll_comm_t comm, const char* name,
                                             const hcoll_tensor_t* in, hcoll_reduce_op_t op,
                                             double prescale, double postscale,
                                             hcoll_request_t* req);

/* Reducescatter of n tensors as one unit; output i belongs to ins[i]. */
HCOLL_API hcoll_status_t hcoll_grouped_reducescatter(hcoll_comm_t comm, const char* name, int n,
                                                     const hcoll_tensor_t* ins,
                                                     hcoll_reduce_op_t op, double prescale,
                                                     double postscale, hcoll_request_t* req);

/* Caller-provided outputs (*_into): the same collectives, writing into the caller's `out` instead
 * of a runtime-owned output. `out` has `in`'s dtype, device, ndim and dims after dim 0 (else
 * INVALID_ARGUMENT at once); its dim 0 depends on the other ranks, so each rank announces it and
 * the negotiation checks it: a wrong dim 0 on any rank fails the operation on EVERY rank with
 * MISMATCH, naming the operation, the output, the rank and both sizes; nothing is written. Once
 * complete, hcoll_request_output(req, i) describes out[i] (the caller's memory, with the result's
 * shape; hcoll_request_free never frees it). `out` must stay valid and untouched until the
 * request completes. `options`: NULL or see hcoll_op_options_t. */

/* Allgather into `out`: dim 0 = the sum of every rank's dim 0. `in` may lie inside `out`: at this
 * rank's own block (rows [sum of dim0 of ranks < r, ...)) it is in place and not copied; any other
 * overlap is staged through a temporary buffer. */
HCOLL_API hcoll_status_t hcoll_allgather_into(hcoll_comm_t comm, const char* name,
                                              const hcoll_tensor_t* in, const hcoll_tensor_t* out,
                                              const hcoll_op_options_t* options,
                                              hcoll_request_t* req);

/* Grouped allgather into outs[0..n): outs[i] receives ins[i]'s concatenation. */
HCOLL_API hcoll_status_t hcoll_grouped_allgather_into(hcoll_comm_t comm, const char* name, int n,
                                                      const hcoll_tensor_t* ins,
                                                      const hcoll_tensor_t* outs,
                                                      const hcoll_op_options_t* options,
                                                      hcoll_request_t* req);

/* Alltoall into `out`: the caller gives a receive buffer large enough, dim 0 >= the rows this
 * rank receives (sum over i of rank i's splits[r]); the rows from rank 0, 1, ... fill it from the
 * start and rows beyond are left untouched. hcoll_request_received_splits says how many came
 * from each rank; hcoll_request_output gives the filled part. `out` must not overlap `in`
 * (INVALID_ARGUMENT). */
HCOLL_API hcoll_status_t hcoll_alltoall_into(hcoll_comm_t comm, const char* name,
                                             const hcoll_tensor_t* in, const int64_t* splits,
                                             const hcoll_tensor_t* out,
                                             const hcoll_op_options_t* options,
                                             hcoll_request_t* req);

/* Reducescatter into `out`: dim 0 = c_r (see hcoll_reducescatter). `out` may overlap `in` (for
 * example in place at in's own rows [off_r, off_r + c_r)); the input is then staged. */
HCOLL_API hcoll_status_t hcoll_reducescatter_into(hcoll_comm_t comm, const char* name,
                                                  const hcoll_tensor_t* in,
                                                  const hcoll_tensor_t* out, hcoll_reduce_op_t op,
                                                  double prescale, double postscale,
                                                  const hcoll_op_options_t* options,
                                                  hcoll_request_t* req);

/* Grouped reducescatter into outs[0..n). */
HCOLL_API hcoll_status_t hcoll_grouped_reducescatter_into(
    hcoll_comm_t comm, const char* name, int n, const hcoll_tensor_t* ins,
    const hcoll_tensor_t* outs, hcoll_reduce_op_t op, double prescale, double postscale,
    const hcoll_op_options_t* options, hcoll_request_t* req);

/* Completes once every member reached it; may overtake pending named operations. A rank that has
 * joined (hcoll_join) counts as having reached it: it takes part without calling it, and its own
 * automatic barrier count moves on, so the next barrier it calls pairs with everyone else's. */
HCOLL_API hcoll_status_t hcoll_barrier(hcoll_comm_t comm, hcoll_request_t* req);

/* Marks this rank as done: until every rank joined, it contributes zeros to other ranks'
 * allreduces and counts as present for barriers (allgather, broadcast, alltoall and
 * reducescatter fail with MISMATCH meanwhile). Operations named automatically ("<op>.<n>") that
 * complete or fail without it advance its own counters, so unnamed calls stay aligned after.
 * Completes when every rank joined; output 0 is an int32 scalar, the rank that joined last in
 * time (the same on every rank; joins within a few microseconds of each other are ordered by
 * rank). */
HCOLL_API hcoll_status_t hcoll_join(hcoll_comm_t comm, hcoll_request_t* req);

/* ---------------------------------------------------------------------------------------------- */
/* Requests                                                                                       */
/* ---------------------------------------------------------------------------------------------- */

/* Returns IN_PROGRESS, SUCCESS, the operation's error, or INVALID_HANDLE. Does not block. */
HCOLL_API hcoll_status_t hcoll_test(hcoll_request_t req);

/* Blocks until the request completes or `timeout_s` seconds passed (< 0: forever; 0: a test).
 * Returns SUCCESS, IN_PROGRESS when `timeout_s` passed first (not an error: the operation goes
 * on, the request stays valid; wait again or test later), the operation's error (MISMATCH,
 * TIMEOUT = the operation failed by the stall timeout, SHUT_DOWN, BACKEND, ...), INVALID_ARGUMENT
 * (timeout_s is NaN) or INVALID_HANDLE. */
HCOLL_API hcoll_status_t hcoll_wait(hcoll_request_t req, double timeout_s);

/* [out] out: output i of a completed allgather, alltoall, reducescatter (i < group size) or join
 * (i = 0). `out->data` and `out->shape` are owned by the request and freed by hcoll_request_free,
 * unless a user allocator was given at initialize, in which case `out->data` belongs to the user.
 * For a *_into operation `out->data` is the caller's own output (never freed by hcoll) and
 * `out->shape` the result's shape (alltoall: the rows received, possibly fewer than its dim 0).
 * Returns SUCCESS, INVALID_ARGUMENT (no such output, NULL out), IN_PROGRESS (not complete yet),
 * the operation's error, INVALID_HANDLE. */
HCOLL_API hcoll_status_t hcoll_request_output(hcoll_request_t req, int i, hcoll_tensor_t* out);

/* [out] splits, n: rows received from each rank by a completed alltoall (n = communicator size).
 * The array is owned by the request. Returns like hcoll_request_output. */
HCOLL_API hcoll_status_t hcoll_request_received_splits(hcoll_request_t req, int i,
                                                       const int64_t** splits, int* n);

/* Returns the request's error message ("" while in progress or on success; NULL for an invalid
 * handle). The string is a copy that stays valid until this thread calls it again. */
HCOLL_API const char* hcoll_request_error(hcoll_request_t req);

/* Frees the request. If still in flight, the operation completes in the background and its
 * outputs are discarded. Returns SUCCESS or INVALID_HANDLE. */
HCOLL_API hcoll_status_t hcoll_request_free(hcoll_request_t req);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HCOLL_HCOLL_H_ */
