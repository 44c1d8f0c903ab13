"""torch.distributed allreduce busbw and DDP step time, backend plexus beside gloo in the
same run (same machine, same ranks, one after the other per size).

usage: PYTHONPATH=<build>/python /usr/bin/python3 tools/bench/torch_allreduce_bench.py
         [--ranks 4] [--sizes 1,4,16,64] (MiB) [--iters N] [--ddp-mb 64]
busbw = bytes * 2 * (n - 1) / n / time, as nccl-tests reports for allreduce. Plexus runs
twice per size: on a tensor allocated before the first plexus group (in torch's own memory:
staged through the pool, a copy in and out), and on one allocated after it (in the pool,
through the pool allocator the first plexus group turns on by default: no copy). The DDP
model is built after the groups, as a training script would, so plexus's gradients and
buckets are in the pool; PLEXUS_TORCH_POOL_ALLOCATOR=0 shows DDP with staging instead.
"""
import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def allreduce_times(group, t, iters, warmup=3):
    for _ in range(warmup):
        dist.all_reduce(t, group=group)
    dist.barrier(group=group)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(t, group=group)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def ddp_step_time(group, mb, steps=8):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    width = 2048
    layers = max(1, int(mb * 2**20 / 4 / (width * width)))
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    ddp = DDP(model, process_group=group, bucket_cap_mb=25)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    x = torch.randn(8, width)
    times = []
    for step in range(steps + 2):
        start = time.perf_counter()
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
        if step >= 2:
            times.append(time.perf_counter() - start)
    times.sort()
    grad_mb = sum(p.numel() for p in model.parameters()) * 4 / 2**20
    return times[len(times) // 2], grad_mb


def rank_main(rank, n, store, args, queue):
    import plexus_torch
    # Tensors in torch's own memory: allocated before any plexus group exists.
    torch_memory = {mib: torch.ones(int(mib * 2**20) // 4) for mib in args.sizes}
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=n,
                            timeout=timedelta(seconds=600))
    groups = {b: dist.new_group(list(range(n)), backend=b) for b in ("plexus", "gloo")}
    allocator_on = os.environ.get("PLEXUS_TORCH_POOL_ALLOCATOR", "") != "0"
    rows = []
    for mib in args.sizes:
        nbytes = int(mib * 2**20)
        t = torch_memory[mib]
        if plexus_torch.from_pool_allocator(t):
            raise RuntimeError("the tensor made before the plexus group is in the pool "
                               "(PLEXUS_TORCH_POOL_ALLOCATOR=1?): the staged column would not be staged")
        for backend in ("gloo", "plexus"):
            rows.append((mib, backend, nbytes * 2 * (n - 1) / n / allreduce_times(groups[backend], t, args.iters)))
        pooled = torch.ones(nbytes // 4)  # after the first plexus group: in the pool
        if allocator_on and not plexus_torch.from_pool_allocator(pooled):
            raise RuntimeError(f"a {mib} MiB tensor made after the plexus group is not in the pool")
        rows.append((mib, "plexus-pool", nbytes * 2 * (n - 1) / n / allreduce_times(groups["plexus"], pooled, args.iters)))
        del pooled
    ddp = []
    if args.ddp_mb > 0:
        for backend in ("gloo", "plexus"):
            t, grad_mb = ddp_step_time(groups[backend], args.ddp_mb)
            ddp.append((backend, t, grad_mb))
    if rank == 0:
        queue.put(([(m, b, bw / 1e9) for m, b, bw in rows], ddp))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--sizes", default="1,4,16,64", help="MiB, comma-separated")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--ddp-mb", type=float, default=64, help="gradient MiB of the DDP model (0: skip)")
    args = p.parse_args()
    args.sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=rank_main, args=(r, args.ranks, f"{d}/store", args, queue))
                 for r in range(args.ranks)]
        for proc in procs:
            proc.start()
        # A rank that fails ends the run at once rather than leaving rank 0's result awaited.
        while True:
            try:
                rows, ddp = queue.get(timeout=1)
                break
            except Exception:  # queue.Empty
                dead = [r for r, proc in enumerate(procs) if proc.exitcode not in (None, 0)]
                if dead:
                    for proc in procs:
                        proc.kill()
                    sys.exit(f"torch_allreduce_bench: rank(s) {dead} failed (their traceback is above)")
        for proc in procs:
            proc.join()
    allocator = os.environ.get("PLEXUS_TORCH_POOL_ALLOCATOR", "") != "0"
    print(f"torch {torch.__version__}, {args.ranks} ranks, {os.cpu_count()} cores; median of {args.iters}; "
          f"pool allocator {'on (default)' if allocator else 'off (PLEXUS_TORCH_POOL_ALLOCATOR=0)'}")
    print(f"{'size':>8} {'gloo GB/s':>10} {'plexus, torch memory':>21} {'ratio':>6} "
          f"{'plexus, pool':>13} {'ratio':>6}")
    by = {(m, b): bw for m, b, bw in rows}
    for mib in args.sizes:
        g, x, p = by[(mib, "gloo")], by[(mib, "plexus")], by[(mib, "plexus-pool")]
        print(f"{mib:>6g}Mi {g:>10.2f} {x:>21.2f} {x / g:>6.2f} {p:>13.2f} {p / g:>6.2f}")
    for backend, t, grad_mb in ddp:
        print(f"DDP step ({grad_mb:.0f} MiB of gradients), {backend}: {t * 1000:.0f} ms")
    if len(ddp) == 2:
        print(f"DDP step time gloo / plexus: {ddp[0][1] / ddp[1][1]:.2f}")


if __name__ == "__main__":
    main()
