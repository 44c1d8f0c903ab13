/* The values that cross the client/daemon boundary as numbers: results, element types and
 * reduction operators. shm/ owns them (the daemon and the rings use them without knowing
 * the client API); libplexus's public header includes this one, and both are installed.
 * A C header: C programs include plexus.h too. */
#ifndef PLEXUS_PLEXUS_TYPES_H
#define PLEXUS_PLEXUS_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum plexus_result {
  PLEXUS_SUCCESS = 0,
  PLEXUS_ERR_INVALID_ARGUMENT = 1,   /* a bad argument in this call (named in the message) */
  PLEXUS_ERR_SYSTEM = 2,             /* an OS call failed (errno text in the message) */
  PLEXUS_ERR_DAEMON_UNAVAILABLE = 3, /* no plexusd answers on the socket, or it is draining */
  PLEXUS_ERR_DAEMON_LOST = 4,        /* the daemon went away while this process used it */
  PLEXUS_ERR_TIMEOUT = 5,            /* e.g. comm init: the message names missing ranks */
  PLEXUS_ERR_PEER_LOST = 6,          /* another rank of the communicator died or left */
  PLEXUS_ERR_MISMATCH = 7,           /* ranks disagreed on count, dtype, op, root or call */
  PLEXUS_ERR_COMM_ABORTED = 8,       /* the communicator was aborted or is broken */
  PLEXUS_ERR_PROTOCOL = 9,           /* the daemon refused a malformed request */
  PLEXUS_ERR_NO_MEMORY = 10,         /* the pool, the GPU staging budget or a job cap is full */
  PLEXUS_ERR_INTERNAL = 11,
  PLEXUS_ERR_VERSION = 12, /* client and daemon speak different protocol versions */
  PLEXUS_ERR_REVOKED = 13  /* a rank or a daemon revoked the communicator (who and why named) */
} plexus_result_t;

typedef enum plexus_dtype {
  PLEXUS_INT8 = 0,
  PLEXUS_UINT8 = 1,
  PLEXUS_INT32 = 2,
  PLEXUS_UINT32 = 3,
  PLEXUS_INT64 = 4,
  PLEXUS_UINT64 = 5,
  PLEXUS_FLOAT16 = 6,
  PLEXUS_BFLOAT16 = 7,
  PLEXUS_FLOAT32 = 8,
  PLEXUS_FLOAT64 = 9,
  PLEXUS_NUM_DTYPES = 10
} plexus_dtype_t;

/* fp16/bf16 accumulate in fp32 and round once. min/max propagate NaN. avg on
 * integers truncates toward zero. Integer sum/prod wrap on overflow. */
typedef enum plexus_redop {
  PLEXUS_SUM = 0,
  PLEXUS_PROD = 1,
  PLEXUS_MIN = 2,
  PLEXUS_MAX = 3,
  PLEXUS_AVG = 4,
  PLEXUS_NUM_REDOPS = 5
} plexus_redop_t;

#ifdef __cplusplus
}
#endif

#endif /* PLEXUS_PLEXUS_TYPES_H */
