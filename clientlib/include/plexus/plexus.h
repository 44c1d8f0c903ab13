/* libplexus: the client API of the Plexus collective-communication service.
 *
 * The shape follows NCCL so that framework authors feel at home: a unique id created
 * by one rank and shared out of band, communicators, and collectives over typed
 * buffers. The difference: every call is asynchronous and returns a request handle
 * (plexus_wait / plexus_test), and the work is done by the node's plexusd, not by
 * this process.
 *
 * Buffers: memory from plexus_alloc() lives in a shared pool the daemon maps, so
 * collectives on it are zero-copy. Any other host pointer also works but is staged
 * through the pool (one extra copy in, one out): slower, documented in docs/using.md.
 *
 * Threads: every call is thread-safe; one communicator should be used by one thread
 * at a time (as in NCCL), since ops of a communicator are matched in call order.
 */
#ifndef PLEXUS_PLEXUS_H
#define PLEXUS_PLEXUS_H

#include <stddef.h>
#include <stdint.h>

/* Results, element types and reduction operators: plexusd and this library share them
 * (installed beside this header). */
#include "plexus/plexus_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* libplexus builds with hidden visibility; only this API is exported. */
#pragma GCC visibility push(default)

#define PLEXUS_VERSION_MAJOR 0
#define PLEXUS_VERSION_MINOR 1
#define PLEXUS_UNIQUE_ID_BYTES 128

typedef struct plexus_unique_id {
  char internal[PLEXUS_UNIQUE_ID_BYTES];
} plexus_unique_id_t;

typedef struct plexus_comm* plexus_comm_t;
typedef struct plexus_request* plexus_request_t;

/* The last error of the calling thread as a sentence naming what was wrong
 * (rank, field, value). Valid until the thread's next plexus call. */
const char* plexus_get_last_error(void);
const char* plexus_result_string(plexus_result_t result);

/* Creates a new unique id (128 random bits of communicator token). */
plexus_result_t plexus_get_unique_id(plexus_unique_id_t* id);

/* Joins communicator `id` as `rank` of `nranks`. Blocks until every rank joined or
 * the timeout (PLEXUS_INIT_TIMEOUT_MS, default 60000) passes; the timeout error names
 * the ranks that never arrived. */
plexus_result_t plexus_comm_init_rank(plexus_comm_t* comm, int nranks, plexus_unique_id_t id,
                                      int rank);
plexus_result_t plexus_comm_init_rank_timeout(plexus_comm_t* comm, int nranks,
                                              plexus_unique_id_t id, int rank, int timeout_ms);
/* Leaves the communicator; waits for this rank's outstanding requests first. */
plexus_result_t plexus_comm_destroy(plexus_comm_t comm);
/* Leaves at once: outstanding requests complete with PLEXUS_ERR_COMM_ABORTED, and the
 * other ranks' pending ops fail with PLEXUS_ERR_PEER_LOST naming this rank. */
plexus_result_t plexus_comm_abort(plexus_comm_t comm);
/* Revokes the communicator on every rank of every node: each op pending on it, and each
 * later one, completes with PLEXUS_ERR_REVOKED naming this rank, its node and `reason`
 * (NULL: none). Not collective: one rank calls it; a daemon that loses a member's node
 * revokes for it. The handle stays valid for plexus_comm_shrink and must still be
 * destroyed. Returns once this node's ops on it have failed; other nodes hear within
 * about one control round trip per level of a fanout-8 tree. */
plexus_result_t plexus_comm_revoke(plexus_comm_t comm, const char* reason);

/* plexus_comm_shrink's flags (NCCL's values). DEFAULT: this rank's ops on comm complete first
 * (waited for up to PLEXUS_INIT_TIMEOUT_MS, else PLEXUS_ERR_TIMEOUT). ABORT: comm is revoked
 * first, so ops in flight end PLEXUS_ERR_REVOKED. */
#define PLEXUS_SHRINK_DEFAULT 0x00
#define PLEXUS_SHRINK_ABORT 0x01
/* A new communicator of comm's ranks less the `exclude_count` ranks in `exclude`, without a
 * unique id: every rank not excluded calls it with the same list (excluded ranks do not
 * call it); ranks keep their order and are numbered 0.. densely, as ncclCommShrink does.
 * The daemons agree on the members; a node holding a kept rank that is lost meanwhile
 * fails the call on every rank with PLEXUS_ERR_PEER_LOST naming it (exclude its ranks
 * too and call again). Connections between the nodes are reused. comm stays valid (it
 * must still be destroyed). Waits at most PLEXUS_INIT_TIMEOUT_MS (default 60000). */
plexus_result_t plexus_comm_shrink(plexus_comm_t comm, const int* exclude, int exclude_count,
                                   int flags, plexus_comm_t* newcomm);
/* Growing a communicator (a replacement node after a shrink): every member calls
 * plexus_comm_grow(comm, nranks, &newcomm) and keeps its rank; each new rank r (comm's size
 * <= r < nranks) calls plexus_comm_init_rank(&newcomm, nranks, id, r) with the id that
 * plexus_comm_grow_id(comm, &id) made on any member (every member makes the same one for
 * the same growth; hand it out as a unique id). comm stays valid. Waits at most
 * PLEXUS_INIT_TIMEOUT_MS. */
plexus_result_t plexus_comm_grow_id(plexus_comm_t comm, plexus_unique_id_t* id);
plexus_result_t plexus_comm_grow(plexus_comm_t comm, int nranks, plexus_comm_t* newcomm);
/* plexus_comm_suspend's flags (NCCL's value). */
#define PLEXUS_SUSPEND_MEM 0x01 /* release what plexusd keeps for the communicator */
/* Parks a communicator that will sit idle for a while (an RL job's, between phases): once
 * every rank of it on this node has suspended it, plexusd releases the memory it keeps for
 * the communicator (its scratch between nodes), and `released` (may be NULL) says how many
 * bytes that call released; it is taken again on the first op after plexus_comm_resume.
 * This rank's ops on comm must have completed; until it resumes, its ops on comm are
 * refused with PLEXUS_ERR_INVALID_ARGUMENT (destroy and abort still work). Neither call
 * waits for other ranks. */
plexus_result_t plexus_comm_suspend(plexus_comm_t comm, int flags, uint64_t* released);
plexus_result_t plexus_comm_resume(plexus_comm_t comm);
plexus_result_t plexus_comm_count(plexus_comm_t comm, int* count);
plexus_result_t plexus_comm_user_rank(plexus_comm_t comm, int* rank);

/* Memory from the shared pool (64-byte aligned). Zero-copy for collectives.
 * After fork(), the child has a session and pool of its own (made on first use); what it
 * inherited from the parent's pool stays mapped at the same addresses but private to it:
 * its writes there reach neither the parent nor plexusd. It is not a snapshot, though: a
 * page the child has not written still shows what the parent and plexusd write later.
 * plexus_free of an inherited buffer in the child does nothing and succeeds. */
plexus_result_t plexus_alloc(void** ptr, size_t bytes);
plexus_result_t plexus_free(void* ptr);
/* The size of this process's pool in bytes (PLEXUS_POOL_SIZE, default 1 GiB). */
plexus_result_t plexus_pool_size(size_t* bytes);

/* GPU buffers: collectives take CUDA device pointers (cudaMalloc memory) as they are; the
 * daemon moves the data with the GPU's copy engines, and this process launches no kernel
 * and spends no SM time on it. Each allocation is registered with plexusd when first used
 * and stays mapped by the daemon until this process exits, a new allocation takes its
 * addresses, or plexus_gpu_forget is called with a pointer into it: call that before
 * cudaFree of a buffer whose memory should go back to the GPU at once. Managed memory is
 * refused; a host buffer beside a GPU one must come from plexus_alloc. Without a CUDA
 * driver every pointer is host memory. Returns PLEXUS_ERR_INVALID_ARGUMENT when ptr is
 * in no registered allocation. */
plexus_result_t plexus_gpu_forget(const void* ptr);

/* Stream order: after plexus_comm_set_stream(comm, stream) (a CUstream / cudaStream_t;
 * NULL goes back to host order), the calls on comm from this thread are ordered on that
 * stream and return at once. The op starts when the stream's earlier work is done, and the
 * stream's later work waits for it; both through stream memory operations on flags the
 * daemon watches (cuStreamWriteValue32 / cuStreamWaitValue32): no kernel and no host
 * callback. Buffers must be GPU memory or from plexus_alloc. A stream being captured into
 * a CUDA graph is refused (the daemon must see each launch). With request == NULL the call
 * is not waited for; its failure is returned by the next call on comm. Not in groups yet. */
plexus_result_t plexus_comm_set_stream(plexus_comm_t comm, void* cuda_stream);

/* Collectives. Each returns at once; *request (if request is not NULL) is completed
 * with plexus_wait/plexus_test. With request == NULL the call waits itself.
 * In-place: sendbuff == recvbuff (allgather: sendbuff == recvbuff + rank*sendcount;
 * reducescatter: recvbuff == sendbuff + rank*recvcount). */
plexus_result_t plexus_allreduce(const void* sendbuff, void* recvbuff, size_t count,
                                 plexus_dtype_t dtype, plexus_redop_t op, plexus_comm_t comm,
                                 plexus_request_t* request);
plexus_result_t plexus_broadcast(const void* sendbuff, void* recvbuff, size_t count,
                                 plexus_dtype_t dtype, int root, plexus_comm_t comm,
                                 plexus_request_t* request);
plexus_result_t plexus_reduce(const void* sendbuff, void* recvbuff, size_t count,
                              plexus_dtype_t dtype, plexus_redop_t op, int root, plexus_comm_t comm,
                              plexus_request_t* request);
/* recvbuff holds nranks*sendcount elements, rank r's contribution at r*sendcount. */
plexus_result_t plexus_allgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 plexus_dtype_t dtype, plexus_comm_t comm,
                                 plexus_request_t* request);
/* sendbuff holds nranks*recvcount elements; rank r receives the reduction of block r. */
plexus_result_t plexus_reducescatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     plexus_dtype_t dtype, plexus_redop_t op, plexus_comm_t comm,
                                     plexus_request_t* request);
/* count elements to and from each rank: both buffers hold nranks*count elements. */
plexus_result_t plexus_alltoall(const void* sendbuff, void* recvbuff, size_t count,
                                plexus_dtype_t dtype, plexus_comm_t comm,
                                plexus_request_t* request);
/* Point-to-point, as MPI matches: a recv takes the oldest message from its peer with its tag;
 * messages from one sender with one tag arrive in the order they were sent. plexus_send and
 * plexus_recv use tag 0. */
plexus_result_t plexus_send(const void* sendbuff, size_t count, plexus_dtype_t dtype, int peer,
                            plexus_comm_t comm, plexus_request_t* request);
plexus_result_t plexus_recv(void* recvbuff, size_t count, plexus_dtype_t dtype, int peer,
                            plexus_comm_t comm, plexus_request_t* request);
plexus_result_t plexus_send_tagged(const void* sendbuff, size_t count, plexus_dtype_t dtype,
                                   int peer, int tag, plexus_comm_t comm,
                                   plexus_request_t* request);
/* peer PLEXUS_ANY_SOURCE takes the oldest message with the tag from whichever rank. *source
 * (may be NULL for a named peer) is set to peer at once and, for any source, to the sender's
 * rank when the recv succeeds (before the wait on it returns): it must stay valid until then,
 * so a stream-ordered recv from any source needs a request. A recv from any source fails with
 * PLEXUS_ERR_PEER_LOST once every other rank has left. */
#define PLEXUS_ANY_SOURCE (-1)
plexus_result_t plexus_recv_tagged(void* recvbuff, size_t count, plexus_dtype_t dtype, int peer,
                                   int tag, int* source, plexus_comm_t comm,
                                   plexus_request_t* request);

/* Batches the calls between start and end into one submission (nestable). Requests
 * are returned as usual; the ops are submitted at the outermost plexus_group_end. */
plexus_result_t plexus_group_start(void);
plexus_result_t plexus_group_end(void);

/* Waits for the request, releases it and sets *request to NULL. Returns the op's
 * result; on error plexus_get_last_error() says why. */
plexus_result_t plexus_wait(plexus_request_t* request);
/* *done = 1 when complete (the request is then released and *request set to NULL,
 * and the op's result is returned), else *done = 0 and PLEXUS_SUCCESS. */
plexus_result_t plexus_test(plexus_request_t* request, int* done);

/* The weight store: named models, each a series of versions, held by the node's plexusd in
 * its own memory (RL's trainer-to-rollout weights). No communicator is needed. A tensor is a
 * name and a buffer; buffers from plexus_alloc and GPU buffers (cudaMalloc or cuMemCreate
 * memory, copied by the daemon's copy engines on its own streams: work queued on a GPU buffer
 * must have ended, as for a copy on another stream) are copied by the daemon directly, other
 * host buffers are staged through the pool (one more copy). Versions count from 1 and only go
 * forward; plexusd keeps each model's newest complete versions (--weight-versions, default 2) under
 * a cap on memory (--weight-store-bytes). A model belongs to the user that first published it. */
typedef struct plexus_weight_tensor {
  const char* name; /* unique within a version; at most 1024 bytes */
  void* buf;
  size_t bytes;
} plexus_weight_tensor_t;
/* Hands a version to this node's plexusd and returns once it holds a copy: the buffers may be
 * reused at once. A table of more tensors than one request holds (thousands) goes as several
 * shards of the version. Refused (nothing kept) with PLEXUS_ERR_INVALID_ARGUMENT for a version not
 * newer than the model's newest, a repeated tensor name or another user's model, and with
 * PLEXUS_ERR_NO_MEMORY past the store's cap; the message says what to change. */
plexus_result_t plexus_weights_publish(const char* model, uint64_t version,
                                       const plexus_weight_tensor_t* tensors, size_t count);
/* One shard of a version that `shards` publishers (every trainer rank its own part) hand in:
 * the version is complete, and pulls see it, once every shard is in. Tensor names are unique
 * across the shards. A shard's table must fit one request (about 300 tensors of 100-byte
 * names); a larger one is refused, asking for more shards. */
plexus_result_t plexus_weights_publish_shard(const char* model, uint64_t version, uint32_t shard,
                                             uint32_t shards, const plexus_weight_tensor_t* tensors,
                                             size_t count);
/* Copies a complete version into the buffers, by tensor name (any subset of the version's
 * tensors, each buffer exactly its size): `version` itself, or with version 0 the newest
 * complete one newer than `newer_than`. Never a mix of two versions. Waits up to timeout_ms
 * for such a version (0: not at all; -1: without limit), then fails with PLEXUS_ERR_TIMEOUT.
 * A GPU buffer stays allocated until the pull returns: the daemon writes it until then.
 * *pulled (may be NULL) is the version copied. */
plexus_result_t plexus_weights_pull(const char* model, uint64_t version, uint64_t newer_than,
                                    int64_t timeout_ms, const plexus_weight_tensor_t* tensors,
                                    size_t count, uint64_t* pulled);
/* The model's newest complete version on this node; 0 if it has none (or no such model). */
plexus_result_t plexus_weights_latest(const char* model, uint64_t* version);
/* Across nodes. On the publisher's node: a key for `model` (a unique id: its token and this
 * node's daemon), to hand out of band as a unique id is. On any other node: the node's daemon
 * subscribes to the key's model as `local_name` there: the publisher's daemon pushes it the
 * newest version now and every version from then on, down a chain of the subscribed nodes
 * (each link carries the bytes once), and local processes pull `local_name` as any model. A
 * node that comes back subscribes again and is sent the newest version. */
plexus_result_t plexus_weights_key(const char* model, plexus_unique_id_t* key);
plexus_result_t plexus_weights_subscribe(const plexus_unique_id_t* key, const char* local_name);

/* Size of one element of dtype in bytes, 0 for an unknown dtype. */
size_t plexus_dtype_size(plexus_dtype_t dtype);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* PLEXUS_PLEXUS_H */
