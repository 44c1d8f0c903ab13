"""DDP on CUDA tensors with backend "cpu:plexus,cuda:nccl", WORLD ranks on GPU 0.

Each rank trains the same model on its own batches; at the end every rank must hold the
same parameters, equal (to float tolerance) to one process trained on all ranks' batches.
Prints which libnccl.so.2 the process mapped and the NCCL version torch reports, the
median step time, and FIGURE lines for gpu-check. With --expect-nccl DIR the mapped
libnccl.so.2 must come from DIR (ours preloaded). Without plexus_torch importable, CPU
tensors go to gloo ("cpu:gloo,cuda:nccl"). --cpu runs the same on CPU tensors with the CPU
backend alone: this script's own check on a machine without a GPU.

--require-plexus fails where plexus_torch cannot be imported (rather than use gloo), and
--deadline-s bounds the wait for the ranks.

usage: ddp_cuda.py WORLD [--expect-nccl DIR] [--require-plexus] [--deadline-s S] [--steps N] [--cpu]
"""
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from spawn_ranks import run_ranks

try:
    import plexus_torch  # noqa: F401  (registers the backend "plexus" for CPU tensors)
    CPU_BACKEND, PLEXUS_IMPORT_ERROR = "plexus", None
except ImportError as e:
    CPU_BACKEND, PLEXUS_IMPORT_ERROR = "gloo", e
BACKEND = f"cpu:{CPU_BACKEND},cuda:nccl"
DEVICE = "cuda"


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def batches(rank, steps):
    gen = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(32, 256, generator=gen), torch.randn(32, 16, generator=gen))
            for _ in range(steps)]


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 16))


def mapped_nccl():
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libnccl" in line}
    return sorted(paths)


def rank_main(rank, world, store, steps, expect_dir, result_dir, device):
    global BACKEND, DEVICE
    if device == "cpu":
        BACKEND, DEVICE = CPU_BACKEND, "cpu"
    else:
        torch.cuda.set_device(0)
    dist.init_process_group(BACKEND, init_method=f"file://{store}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    dev = torch.device(DEVICE, 0) if DEVICE == "cuda" else torch.device("cpu")
    model = make_model().to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[0] if DEVICE == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    times = []
    for x, y in batches(rank, steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x.to(dev)), y.to(dev)).backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    # Every rank's parameters, over NCCL (CUDA; the CPU backend with --cpu) and over the
    # CPU backend.
    gathered = [torch.empty_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    cpu = params.cpu()
    cpu_gathered = [torch.empty_like(cpu) for _ in range(world)]
    dist.all_gather(cpu_gathered, cpu)
    for r in range(world):
        assert torch.equal(gathered[r], params), f"rank {r}'s parameters differ (CUDA gather)"
        assert torch.equal(cpu_gathered[r], cpu), f"rank {r}'s parameters differ (CPU gather)"
    nccl = mapped_nccl()
    if expect_dir:
        assert any(p.startswith(expect_dir + "/") for p in nccl), \
            f"libnccl mapped from {nccl}, none from {expect_dir}"
    if rank == 0:
        version = torch.cuda.nccl.version() if DEVICE == "cuda" else None
        torch.save({"params": cpu, "times": times, "nccl": nccl, "version": version},
                   f"{result_dir}/rank0.pt")
    dist.barrier()
    dist.destroy_process_group()


def reference(world, steps):
    """One process, every rank's batch each step: DDP's averaged gradient."""
    model = make_model().to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    per_rank = [batches(r, steps) for r in range(world)]
    for s in range(steps):
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(model(per_rank[r][s][0].to(DEVICE)),
                                                per_rank[r][s][1].to(DEVICE)) for r in range(world))
        (loss / world).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()


def main():
    global BACKEND, DEVICE
    world, args = int(sys.argv[1]), sys.argv[2:]
    expect_dir, steps, deadline_s = None, 30, 75
    if "--cpu" in args:
        args.remove("--cpu")
        BACKEND, DEVICE = CPU_BACKEND, "cpu"
    if "--require-plexus" in args:
        args.remove("--require-plexus")
        if PLEXUS_IMPORT_ERROR is not None:
            sys.exit(f"FAIL plexus_torch cannot be imported: {PLEXUS_IMPORT_ERROR}")
    while args:
        if args[0] == "--expect-nccl":
            expect_dir = os.path.realpath(args[1])
        elif args[0] == "--steps":
            steps = int(args[1])
            if steps < 6:
                sys.exit("--steps: at least 6 (the first 5 are warm-up)")
        elif args[0] == "--deadline-s":
            deadline_s = float(args[1])
        else:
            sys.exit(f"unknown argument {args[0]}")
        args = args[2:]
    where = f"GPU 0 ({torch.cuda.get_device_name(0)})" if DEVICE == "cuda" else "the CPU"
    print(f"backend {BACKEND}, {world} ranks on {where}, torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        bad = run_ranks(rank_main, world, (f"{d}/store", steps, expect_dir, d, DEVICE), deadline_s)
        if bad:
            print(f"FAIL DDP with {world} ranks on {BACKEND}: ranks failed or hung (rank: exit "
                  f"code, negative for a signal, None for a hang): {bad}", flush=True)
            sys.exit(1)
        got = torch.load(f"{d}/rank0.pt")
    want = reference(world, steps)
    worst = float((got["params"] - want).abs().max())
    print(f"libnccl mapped: {got['nccl']}; torch.cuda.nccl.version() = {got['version']}")
    if worst > 1e-4:
        print(f"FAIL parameters differ from one process trained on every batch by {worst:.2e}")
        sys.exit(1)
    median_ms = statistics.median(got["times"][5:]) * 1e3
    # Where ours was preloaded, the image's may be mapped too (torch loads it by path): name
    # the one asked for.
    ours = [p for p in got["nccl"] if expect_dir and p.startswith(expect_dir + "/")]
    source = os.path.dirname((ours or got["nccl"] or ["?"])[0])
    print(f"FIGURE {world} ranks on {BACKEND}, NCCL {got['version']} from {source}: "
          f"median step {median_ms:.2f} ms; parameters equal on every rank, within {worst:.1e} of one process")


if __name__ == "__main__":
    main()
