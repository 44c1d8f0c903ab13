"""torch.distributed backend "plexus" on one node: every collective x dtype x op against
values computed here, uneven all_to_all_single, subgroups, non-contiguous tensors, Work and
future semantics, a rank killed mid-collective, the group's timeout, DDP training beside
gloo, a group shrunk past a killed rank then suspended and resumed, and torch 2.x's coalesced
tensor forms. Run by torch_backend_test.sh (a private plexusd, Debian's torch 1.13) and
tools/torch2/run.sh (torch 2.x); each case prints "ok <name>".

usage: torch_backend_test.py CASE WORLD_SIZE [--ranks R,R --store FILE]
  CASE: collectives, pool, pool_full, pool_off, failures, timeout, ddp, recovery, coalesced
  (torch 2.1 on; says "skip" on older ones). By default every rank runs here; with
  --ranks only those (a node of a cluster), meeting the others through FILE.
"""
import os
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import plexus_torch  # registers the backend

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}


def values(rank, n, dtype):
    """Rank `rank`'s input: small values exact in every dtype (bool: a pattern)."""
    base = torch.arange(n, dtype=torch.int64) % 3 + rank + 1
    if dtype == torch.bool:
        return (torch.arange(n) + rank) % 3 == 0
    return base.to(dtype)


def expected_reduce(op, world, n, dtype):
    inputs = [values(r, n, dtype) for r in range(world)]
    if dtype == torch.bool:
        stack = torch.stack(inputs)
        if op in ("SUM", "MAX"):
            return stack.any(0)
        return stack.all(0)  # PRODUCT, MIN
    acc = torch.stack([x.to(torch.float64) for x in inputs])
    if op == "SUM":
        r = acc.sum(0)
    elif op == "PRODUCT":
        r = acc.prod(0)
    elif op == "MIN":
        r = acc.min(0).values
    elif op == "MAX":
        r = acc.max(0).values
    else:
        r = acc.sum(0) / world
        if not dtype.is_floating_point:
            r = torch.trunc(r)
    if not dtype.is_floating_point:  # integers wrap as the element type does
        return r.to(torch.int64).to(dtype)
    return r.to(dtype)


def check(name, got, want):
    if not torch.equal(got, want):
        raise AssertionError(f"{name}: got {got[:8]} wanted {want[:8]}")


def case_collectives(rank, world):
    n = 1031
    for dtype in DTYPES:
        for op_name, op in OPS.items():
            if dtype == torch.bool and op_name == "AVG":
                continue
            t = values(rank, n, dtype)
            work = dist.all_reduce(t, op=op, async_op=True)
            work.wait()
            check(f"all_reduce {dtype} {op_name}", t, expected_reduce(op_name, world, n, dtype))
        # broadcast, reduce
        t = values(rank, n, dtype)
        dist.broadcast(t, src=world - 1)
        check(f"broadcast {dtype}", t, values(world - 1, n, dtype))
        t = values(rank, n, dtype)
        dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
        if rank == 1:
            check(f"reduce {dtype}", t, expected_reduce("MAX", world, n, dtype))
        # all_gather (list and one tensor), gather, scatter
        outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, values(rank, n, dtype))
        for r in range(world):
            check(f"all_gather {dtype}", outs[r], values(r, n, dtype))
        flat = torch.zeros(world * n, dtype=dtype)
        dist._all_gather_base(flat, values(rank, n, dtype))
        check(f"_all_gather_base {dtype}", flat, torch.cat([values(r, n, dtype) for r in range(world)]))
        gathered = [torch.zeros(n, dtype=dtype) for _ in range(world)] if rank == 0 else None
        dist.gather(values(rank, n, dtype), gathered, dst=0)
        if rank == 0:
            for r in range(world):
                check(f"gather {dtype}", gathered[r], values(r, n, dtype))
        out = torch.zeros(n, dtype=dtype)
        dist.scatter(out, [values(r, n, dtype) for r in range(world)] if rank == world - 1 else None,
                     src=world - 1)
        check(f"scatter {dtype}", out, values(rank, n, dtype))
        if dtype != torch.bool:
            # reduce_scatter (list and one tensor): block r of every rank's input, summed
            blocks = [values(rank + r, n, dtype) for r in range(world)]
            out = torch.zeros(n, dtype=dtype)
            dist.reduce_scatter(out, blocks)
            want = sum(values(q + rank, n, dtype).to(torch.float64) for q in range(world))
            check(f"reduce_scatter {dtype}", out, want.to(torch.int64).to(dtype) if not dtype.is_floating_point else want.to(dtype))
            out = torch.zeros(n, dtype=dtype)
            dist._reduce_scatter_base(out, torch.cat(blocks))
            check(f"_reduce_scatter_base {dtype}", out, want.to(torch.int64).to(dtype) if not dtype.is_floating_point else want.to(dtype))
        # all_to_all: rank r sends block q (value 100*r+q) to rank q
        ins = [torch.full((5,), 100 * rank + q).to(dtype) for q in range(world)]
        outs = [torch.zeros(5, dtype=dtype) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for q in range(world):
            check(f"all_to_all {dtype}", outs[q], torch.full((5,), 100 * q + rank).to(dtype))
    print(f"ok {len(DTYPES)} dtypes: all_reduce x 5 ops, broadcast, reduce, all_gather, "
          f"_all_gather_base, gather, scatter, reduce_scatter, _reduce_scatter_base, all_to_all",
          flush=True) if rank == 0 else None

    # Bitwise ops are refused, naming them.
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND was accepted")
    except RuntimeError as e:
        assert "bitwise" in str(e), e

    # A type Plexus lacks is refused naming it, before anything is submitted: the next call
    # works. So is an all_to_all_single whose output is too small.
    try:
        dist.all_reduce(torch.ones(4, dtype=torch.int16))
        raise AssertionError("int16 was accepted")
    except RuntimeError as e:
        assert "Short" in str(e) or "int16" in str(e), e
    t = torch.ones(3)
    dist.all_reduce(t)
    assert float(t[0]) == world
    try:
        dist.all_to_all_single(torch.zeros(world * 2), torch.zeros(world * 4))
        raise AssertionError("a short all_to_all_single output was accepted")
    except RuntimeError as e:
        assert "output" in str(e), e

    # Uneven all_to_all_single: rank r sends (q + 1) * (r + 1) rows to rank q.
    rows_out = [(q + 1) * (rank + 1) for q in range(world)]
    rows_in = [(rank + 1) * (q + 1) for q in range(world)]
    inp = torch.cat([torch.full((rows_out[q], 3), float(1000 * rank + q)) for q in range(world)])
    out = torch.zeros(sum(rows_in), 3)
    dist.all_to_all_single(out, inp, output_split_sizes=rows_in, input_split_sizes=rows_out)
    want = torch.cat([torch.full((rows_in[q], 3), float(1000 * q + rank)) for q in range(world)])
    check("all_to_all_single uneven", out, want)
    even_in = torch.arange(world * 4, dtype=torch.float32) + 100 * rank
    even_out = torch.zeros(world * 4)
    dist.all_to_all_single(even_out, even_in)
    want = torch.cat([torch.arange(4, dtype=torch.float32) + 4 * rank + 100 * q for q in range(world)])
    check("all_to_all_single even", even_out, want)

    # Non-contiguous tensors (every other column), in and out.
    big = torch.zeros(64, 10)
    view = big[:, ::2]
    view.fill_(rank + 1)
    dist.all_reduce(view)
    assert float(big[:, 0].min()) == world * (world + 1) / 2 and float(big[:, 1].abs().max()) == 0

    # all_reduce_coalesced, send/recv with tags, barrier
    ts = [torch.ones(7) * rank, torch.ones(3) * rank]
    dist.all_reduce_coalesced(ts)
    assert float(ts[0][0]) == sum(range(world)) and float(ts[1][2]) == sum(range(world))
    if rank == 0:
        # Tag 7 first, then tag 3: rank 1 receives tag 3 first, then takes tag 7. (A send
        # within a node completes when its recv takes it, so both are posted at once.)
        first = dist.isend(torch.arange(10.), dst=1, tag=7)
        second = dist.isend(torch.arange(10.) + 30, dst=1, tag=3)
        first.wait()
        second.wait()
    elif rank == 1:
        got = torch.zeros(10)
        dist.recv(got, src=0, tag=3)
        check("send/recv by tag", got, torch.arange(10.) + 30)
        # From any source: the sender's rank comes back.
        assert dist.recv(got, tag=7) == 0, "recv from any source named the wrong sender"
        check("recv from any source", got, torch.arange(10.))
    dist.barrier()

    # Work and future: async, is_completed, the future's value is the output list.
    t = torch.ones(1 << 16)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    result = fut.wait()
    assert isinstance(result, list) and torch.equal(result[0], t) and float(t[0]) == world
    deadline = time.time() + 10
    while not work.is_completed() and time.time() < deadline:
        time.sleep(0.001)
    assert work.is_completed() and work.is_success()
    chained = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    assert float(chained.wait()[0]) == 2 * world

    # Subgroups: even ranks, and a group that leaves rank 0 out.
    evens = dist.new_group([r for r in range(world) if r % 2 == 0], backend="plexus")
    rest = dist.new_group(list(range(1, world)), backend="plexus")
    t = torch.ones(9) * rank
    if rank % 2 == 0:
        dist.all_reduce(t, group=evens)
        assert float(t[0]) == sum(r for r in range(world) if r % 2 == 0)
    t = torch.ones(9) * rank
    if rank > 0:
        dist.all_reduce(t, group=rest)
        assert float(t[0]) == sum(range(1, world))
    if rank == 0:
        print("ok bitwise refused, uneven all_to_all_single, non-contiguous, coalesced, "
              "send/recv, barrier, Work/future, subgroups", flush=True)


def case_failures(rank, world):
    # A rank killed mid-collective: the others' Work fails naming it, well within the timeout.
    t = torch.ones(1 << 20)
    if rank == world - 1:
        time.sleep(0.5)
        os._exit(0)
    start = time.time()
    try:
        dist.all_reduce(t)
        raise AssertionError("the allreduce succeeded without the killed rank")
    except RuntimeError as e:
        took = time.time() - start
        assert f"rank {world - 1}" in str(e), e
        assert took < 20, took
        if rank == 0:
            print(f"ok a rank killed mid-collective: failed in {took:.2f} s: {e}", flush=True)


def case_timeout(rank, world):
    # Rank 1 never joins rank 0's allreduce: the group's 3 s timeout fails it, naming rank 0.
    if rank == 0:
        start = time.time()
        try:
            dist.all_reduce(torch.ones(8))
            raise AssertionError("the allreduce succeeded without its peer")
        except RuntimeError as e:
            took = time.time() - start
            assert "rank 0" in str(e) and "timed out" in str(e), e
            assert 2.5 < took < 15, took
            print(f"ok the group's timeout: failed after {took:.2f} s: {e}", flush=True)
    else:
        time.sleep(6)


def ddp_train(group, rank, steps, sizes, batch, seed):
    """DDP on `group` training a Linear-ReLU-Linear of `sizes` from seed 0 for `steps` steps on
    this rank's random batches (a generator seeded `seed` + rank): the losses and the final
    parameters, flattened."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.ReLU(),
                                torch.nn.Linear(sizes[1], sizes[2]))
    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(seed + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(batch, sizes[0], generator=gen)
        y = torch.randn(batch, sizes[2], generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()])


def ddp_run(rank, world, backend, steps=20):
    group = dist.new_group(list(range(world)), backend=backend)
    return ddp_train(group, rank, steps, (32, 64, 4), 16, 1234)


def case_ddp(rank, world):
    plexus_losses, plexus_params = ddp_run(rank, world, "plexus")
    gloo_losses, gloo_params = ddp_run(rank, world, "gloo")
    # Every rank ends with the same parameters.
    gathered = [torch.zeros_like(plexus_params) for _ in range(world)]
    dist.all_gather(gathered, plexus_params)
    for r in range(world):
        assert torch.equal(gathered[r], plexus_params), f"rank {r}'s parameters differ"
    worst = max(abs(a - b) for a, b in zip(plexus_losses, gloo_losses))
    assert worst < 1e-4, (plexus_losses, gloo_losses)
    assert torch.allclose(plexus_params, gloo_params, atol=1e-5)
    if rank == 0:
        print(f"ok DDP with {world} ranks: parameters identical on every rank; loss "
              f"{plexus_losses[0]:.4f} -> {plexus_losses[-1]:.4f}, largest difference from "
              f"gloo {worst:.2e}", flush=True)


def train_on(group, rank):
    """A few DDP steps on `group`; every member's parameters, gathered over it."""
    _, mine = ddp_train(group, rank, 5, (8, 16, 2), 4, 99)
    every = [torch.empty_like(mine) for _ in range(group.size())]
    dist.all_gather(every, mine, group=group)
    return mine, every


def case_recovery(rank, world):
    # The last rank dies; the others' allreduce fails naming it; they shrink the group without
    # it (torch's own dist.shrink_group where the torch has one, else plexus_torch's), get exact
    # results and train DDP on it; then park the group (suspend: work refused) and resume it.
    t = torch.ones(16)
    dist.all_reduce(t)
    assert float(t[0]) == world
    victim = world - 1
    if rank == victim:
        os._exit(0)
    try:
        dist.all_reduce(torch.ones(1 << 16))
        raise AssertionError("the allreduce succeeded without the killed rank")
    except RuntimeError as e:
        assert f"rank {victim}" in str(e), e
    world_backend = (dist.group.WORLD._get_backend(torch.device("cpu"))
                     if hasattr(dist.group.WORLD, "_get_backend") else dist.group.WORLD)
    if hasattr(dist, "shrink_group") and getattr(world_backend, "supports_shrinking", False):
        # The default group is shrunk and becomes the new default (torch's semantics).
        group, how = dist.shrink_group([victim]), f"torch {torch.__version__}'s dist.shrink_group"
    else:
        group, how = plexus_torch.shrink_group(dist.group.WORLD, [victim]), "plexus_torch.shrink_group"
    size = group.size()
    assert size == world - 1, size
    t = torch.ones(1000) * (rank + 1)
    dist.all_reduce(t, group=group)
    check("allreduce on the shrunk group", t, torch.ones(1000) * sum(range(1, world)))
    mine, every = train_on(group, rank)
    for r, p in enumerate(every):
        assert torch.equal(p, mine), f"rank {r}'s parameters differ after DDP on the shrunk group"
    released = plexus_torch.suspend(group)
    try:
        dist.all_reduce(torch.ones(4), group=group)
        raise AssertionError("an allreduce on a suspended group succeeded")
    except RuntimeError as e:
        assert "suspend" in str(e), e
    plexus_torch.resume(group)
    parked = "plexus_torch.suspend/resume"
    backend = group._get_backend(torch.device("cpu")) if hasattr(group, "_get_backend") else None
    if backend is not None and hasattr(backend, "suspend"):
        backend.suspend()  # torch's memory offload API, on the group's plexus backend
        backend.resume()
        parked += " and torch's Backend.suspend/resume"
    t = torch.ones(1000) * (rank + 1)
    dist.all_reduce(t, group=group)
    check("allreduce after resume", t, torch.ones(1000) * sum(range(1, world)))
    # A replacement (replacement_main) takes the victim's rank back: the group grows to
    # `world` with the id rank 0 hands out through a file.
    if rank == 0:
        with open(f"{STORE_DIR[0]}/grow_id.tmp", "wb") as f:
            f.write(plexus_torch.grow_id(group))
        os.rename(f"{STORE_DIR[0]}/grow_id.tmp", f"{STORE_DIR[0]}/grow_id")
    grown = plexus_torch.grow_group(group, world)
    check_grown(grown, rank, world)
    if rank == 0:
        print(f"ok rank {victim} killed: the allreduce failed naming it; {how} to {size} ranks, "
              f"exact, DDP parameters equal; {parked} (a suspended group refuses work; "
              f"{released} bytes released, none kept on one node), exact after; grown back to "
              f"{world} with a replacement rank, exact, DDP parameters equal", flush=True)


def check_grown(grown, rank, world):
    """An allreduce, an allgather and DDP on the grown group, exact and equal. (No broadcast:
    torch's bookkeeping does not know the group, and dist.broadcast looks its source up
    there.)"""
    t = torch.ones(1000) * (rank + 1)
    dist.all_reduce(t, group=grown)
    check("allreduce on the grown group", t, torch.ones(1000) * sum(range(1, world + 1)))
    mine = torch.arange(100, dtype=torch.float32) * (rank + 1)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine, group=grown)
    for r in range(world):
        check(f"allgather on the grown group, rank {r}", every[r],
              torch.arange(100, dtype=torch.float32) * (r + 1))
    mine, every = train_on(grown, rank)
    for r, p in enumerate(every):
        assert torch.equal(p, mine), f"rank {r}'s parameters differ after DDP on the grown group"


def replacement_main(world, store_dir):
    """case_recovery's new rank world-1: joins the survivors' growth with rank 0's id."""
    try:
        # Only an id written after this process started (not an earlier run's, in a folder
        # a cluster run reuses).
        started = time.time() - 1
        deadline = time.time() + 120
        path = f"{store_dir}/grow_id"
        while not (os.path.exists(path) and os.path.getmtime(path) >= started):
            assert time.time() < deadline, "no grow id from rank 0 within 120 s"
            time.sleep(0.05)
        with open(f"{store_dir}/grow_id", "rb") as f:
            grown = plexus_torch.join_grown_group(f.read(), world - 1, world)
        check_grown(grown, world - 1, world)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)


def case_coalesced(rank, world):
    # torch 2.x's coalesced tensor forms: all_gather_into_tensor and reduce_scatter_tensor in
    # a _coalescing_manager (FSDP's pattern), and the backend's own entry points.
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 1):
        if rank == 0:
            print(f"skip torch {torch.__version__} has no coalesced tensor forms (torch 2.1 on)",
                  flush=True)
        return
    from torch.distributed.distributed_c10d import _coalescing_manager
    shapes = [1, 3, 7, 1000]

    def gather_in(k):
        return torch.arange(k, dtype=torch.float32) + 1000 * rank

    def gather_want(k):
        return torch.cat([torch.arange(k, dtype=torch.float32) + 1000 * r for r in range(world)])

    def scatter_in(k):
        return torch.arange(world * k, dtype=torch.float32) * (rank + 1)

    def scatter_want(k):
        whole = torch.arange(world * k, dtype=torch.float32) * sum(range(1, world + 1))
        return whole[rank * k:(rank + 1) * k]

    # Each form in a _coalescing_manager, then through the group's own coalesced call, which
    # reaches the backend's (torch's defaults would refuse).
    group = dist.group.WORLD
    forms = [  # name, output size, input, wanted output, the op alone, the group's call
        ("all_gather_into_tensor", lambda k: world * k, gather_in, gather_want,
         dist.all_gather_into_tensor, "allgather_into_tensor_coalesced"),
        ("reduce_scatter_tensor", lambda k: k, scatter_in, scatter_want,
         dist.reduce_scatter_tensor, "reduce_scatter_tensor_coalesced"),
    ]
    for name, size, make_in, want, alone, coalesced in forms:
        outs = [torch.empty(size(k)) for k in shapes]
        with _coalescing_manager(async_ops=True) as cm:
            for o, k in zip(outs, shapes):
                alone(o, make_in(k))
        cm.wait()
        for o, k in zip(outs, shapes):
            check(f"coalesced {name} of {k}", o, want(k))
        outs = [torch.empty(size(k)) for k in shapes]
        getattr(group, coalesced)(outs, [make_in(k) for k in shapes]).wait()
        for o, k in zip(outs, shapes):
            check(f"{coalesced} of {k}", o, want(k))
    try:
        group.allgather_into_tensor_coalesced([torch.empty(3)], [torch.empty(2)]).wait()
        raise AssertionError("a coalesced allgather with a wrong output size succeeded")
    except RuntimeError as e:
        assert "times the input's elements" in str(e), e
    if rank == 0:
        print(f"ok torch {torch.__version__}: all_gather_into_tensor and reduce_scatter_tensor "
              f"coalesced ({len(shapes)} each, in a _coalescing_manager and on the group), "
              "exact; a wrong size refused", flush=True)


def case_pool(rank, world):
    # Tensors in the Plexus pool: one made by empty_like, then the pool allocator the plexus
    # group turned on (large allocations only, then a lower threshold); results exact, DDP
    # as with gloo, and a forked child (a DataLoader worker) sees the pool copy-on-write.
    t = plexus_torch.empty_like(torch.empty(1 << 18)).fill_(rank + 1)
    dist.all_reduce(t)
    assert float(t[0]) == world * (world + 1) / 2 and float(t[-1]) == float(t[0])
    default_big = torch.full((1 << 20,), float(rank + 1))  # 4 MiB: over the 1 MiB default
    assert plexus_torch.from_pool_allocator(default_big), "the plexus group left the allocator off"
    small = torch.ones(1 << 10)  # 4 KiB: under it
    assert not plexus_torch.from_pool_allocator(small), "a 4 KiB tensor went to the pool"
    dist.all_reduce(default_big)
    assert float(default_big.min()) == float(default_big.max()) == world * (world + 1) / 2
    plexus_torch.use_pool_allocator(min_bytes=4096)
    big = torch.full((1 << 20,), float(rank))
    assert plexus_torch.from_pool_allocator(torch.ones(2048)), "min_bytes=4096 not honoured"
    dist.all_reduce(big, op=dist.ReduceOp.MAX)
    assert float(big.min()) == world - 1
    losses, params = ddp_run(rank, world, "plexus", steps=5)
    gloo_losses, gloo_params = ddp_run(rank, world, "gloo", steps=5)
    assert torch.allclose(params, gloo_params, atol=1e-5), "DDP on pool memory differs from gloo"
    inherited = torch.full((1 << 20,), 5.0)
    assert plexus_torch.from_pool_allocator(inherited)
    pid = os.fork()
    if pid == 0:
        # One intra-op thread, as a DataLoader worker sets: the parent's OpenMP team does
        # not survive fork, and libgomp (torch 2.x's) hangs in the child's first parallel op.
        torch.set_num_threads(1)
        ok = float(inherited.min()) == float(inherited.max()) == 5.0  # the parent's values
        inherited.fill_(-1.0)  # must not reach the parent
        x = torch.ones(1 << 20)
        ok = ok and float(x.sum()) == (1 << 20) and not plexus_torch.from_pool_allocator(x)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0, f"the forked child failed: {status}"
    assert float(inherited.min()) == float(inherited.max()) == 5.0, \
        "a forked child's writes reached the parent's pool tensor"
    dist.all_reduce(inherited)  # still the pool the daemon sees
    assert float(inherited.min()) == float(inherited.max()) == 5.0 * world
    if rank == 0:
        print("ok tensors in the pool: empty_like, the allocator on from the plexus group "
              "(1 MiB and up, then min_bytes), allreduce and DDP as gloo, a forked child "
              "copy-on-write", flush=True)


def case_pool_full(rank, world):
    # PLEXUS_POOL_SIZE=64M: the allocator's arena (half of it) filled with 1 MiB tensors,
    # every other one freed, then 1.5 MiB tensors asked for (which no hole fits): none may
    # land in the other half, so a 24 MiB tensor made before the group still stages whole
    # there. Exact.
    before = PRE_GROUP["big"]
    held = []
    while True:
        t = torch.ones(1 << 18)  # 1 MiB
        if not plexus_torch.from_pool_allocator(t):
            break
        held.append(t)
        assert len(held) < 64, "an arena of half a 64 MiB pool took 64 tensors of 1 MiB"
    assert 16 <= len(held) <= 32, f"the arena of half a 64 MiB pool held {len(held)} MiB"
    del held[::2]
    larger = [torch.ones(3 << 17) for _ in range(16)]  # 1.5 MiB each
    in_pool = sum(plexus_torch.from_pool_allocator(t) for t in larger)
    before.fill_(rank + 1)
    dist.all_reduce(before)
    assert float(before.min()) == float(before.max()) == world * (world + 1) / 2
    if rank == 0:
        print(f"ok the allocator's arena full, then holed ({in_pool} of 16 larger tensors in "
              f"it): a 24 MiB torch tensor still staged whole, exact", flush=True)


def case_pool_off(rank, world):
    # PLEXUS_TORCH_POOL_ALLOCATOR=0 (set before the group): tensors stay in torch's memory
    # and are staged, exactly.
    big = torch.full((1 << 20,), float(rank + 1))
    assert not plexus_torch.from_pool_allocator(big), "the allocator is on despite =0"
    dist.all_reduce(big)
    assert float(big.min()) == float(big.max()) == world * (world + 1) / 2
    if rank == 0:
        print("ok PLEXUS_TORCH_POOL_ALLOCATOR=0: tensors in torch memory, staged, exact",
              flush=True)


# Tensors a case needs in torch's own memory: made before the group turns the allocator on.
PRE_GROUP = {}

CASES = {"collectives": case_collectives, "pool": case_pool, "pool_off": case_pool_off,
         "pool_full": case_pool_full,
         "failures": case_failures, "timeout": case_timeout, "ddp": case_ddp,
         "recovery": case_recovery, "coalesced": case_coalesced}


STORE_DIR = [None]  # the folder of the group's file store (case_recovery's grow id)


def rank_main(rank, world, case, store_path, timeout_s):
    STORE_DIR[0] = os.path.dirname(store_path)
    try:
        if case == "pool_off":
            os.environ["PLEXUS_TORCH_POOL_ALLOCATOR"] = "0"
        if case == "pool_full":
            os.environ["PLEXUS_POOL_SIZE"] = "64M"
            PRE_GROUP["big"] = torch.empty(6 << 20)  # 24 MiB
        dist.init_process_group("plexus", init_method=f"file://{store_path}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout_s))
        CASES[case](rank, world)
        if case not in ("failures", "timeout", "recovery"):
            dist.barrier()
        dist.destroy_process_group()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)


def main():
    case, world = sys.argv[1], int(sys.argv[2])
    # Across nodes each node runs some of the ranks: --ranks 2,3 --store SHARED_FILE.
    ranks = list(range(world))
    store = None
    args = sys.argv[3:]
    while args:
        if args[0] == "--ranks":
            ranks = [int(r) for r in args[1].split(",")]
        elif args[0] == "--store":
            store = args[1]
        else:
            sys.exit(f"unknown argument {args[0]}")
        args = args[2:]
    timeout_s = 3 if case == "timeout" else 60
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=rank_main, args=(r, world, case, store or f"{d}/store", timeout_s))
                 for r in ranks]
        if case == "recovery" and world - 1 in ranks:
            procs.append(ctx.Process(target=replacement_main,
                                     args=(world, os.path.dirname(store or f"{d}/store"))))
            ranks = ranks + ["replacement"]
        for p in procs:
            p.start()
        deadline = time.time() + 240
        for p in procs:
            p.join(max(1, deadline - time.time()))
        bad = {r: p.exitcode for r, p in zip(ranks, procs) if p.exitcode != 0}
        for p in procs:
            if p.is_alive():
                p.kill()
        if bad:
            print(f"FAIL {case} with {world} ranks: ranks failed (rank: exit code, negative for "
                  f"a signal, None while still running): {bad}", flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
