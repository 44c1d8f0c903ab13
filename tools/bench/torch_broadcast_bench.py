"""One rank of torch.distributed.broadcast of one tensor from rank 0, the weight relay's
peer in tools/bench/weights_cluster.sh (one rank per namespace node, started on every node
at once; the nodes share one clock).

usage: PYTHONPATH=<build>/python /usr/bin/python3 tools/bench/torch_broadcast_bench.py
         --backend gloo|plexus --rank R --world N --store FILE --bytes B [--iters 2]
Per iteration, after a barrier, rank 0 fills the tensor with the iteration's value and
broadcasts it; every rank checks a sample of the bytes it got and prints
  iteration start_ms end_ms
(wall clock, ms): rank 0's start is the broadcast's start, the largest end over the ranks
its end. The first iteration opens what the backend opens on first use (plexus: the links
between the daemons; gloo connects every pair when the group forms).
"""
import argparse
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["gloo", "plexus"], required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--store", required=True, help="a file every rank sees (FileStore)")
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--timeout-s", type=int, default=900)
    args = parser.parse_args()
    if args.backend == "plexus":
        import plexus_torch  # noqa: F401  registers the backend
    dist.init_process_group(args.backend, init_method=f"file://{args.store}", rank=args.rank,
                            world_size=args.world, timeout=timedelta(seconds=args.timeout_s))
    # Allocated after the group: with plexus it lies in the pool (its allocator), as a
    # training script's tensors would, so the daemon reads and writes it in place.
    t = torch.empty(args.bytes, dtype=torch.uint8)
    if args.backend == "plexus" and not plexus_torch.from_pool_allocator(t):
        print(f"rank {args.rank}: the tensor is not in the pool (staged)", file=sys.stderr)
    step = max(1, args.bytes // 4096)
    for it in range(1, args.iters + 1):
        value = it % 251 + 1
        if args.rank == 0:
            t.fill_(value)
        else:
            t.fill_(0)
        dist.barrier()
        start = time.time()
        dist.broadcast(t, src=0)
        end = time.time()
        got = t[::step]
        if not bool(got.eq(value).all()) or int(t[-1]) != value:
            print(f"rank {args.rank}: iteration {it}: wrong bytes received", file=sys.stderr)
            return 1
        print(f"{it} {start * 1000:.1f} {end * 1000:.1f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
