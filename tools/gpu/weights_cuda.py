"""The weight store on CUDA tensors: a state_dict of BYTES in 8 tensors on GPU 0, published
through plexus_torch.weights and pulled into another state_dict on the GPU, by plexusd's copy
engines; every version checked equal. Beside it, in the same run, the same bytes copied by
torch: to pageable host memory (tensor.cpu(), what a trainer would do by hand), and to and
from pinned host memory (copy_). Prints FIGURE lines for gpu-check; exit 1 on a wrong byte.
--cpu runs the same on CPU tensors: this script's own check on a machine without a GPU.

usage: weights_cuda.py [--bytes N] [--versions N] [--cpu]
"""
import argparse
import os
import statistics
import sys
import time

import torch

import plexus_torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bytes", type=int, default=1 << 30)
    parser.add_argument("--versions", type=int, default=5)  # at least 2: the first is not timed
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()
    if args.versions < 2:
        parser.error("--versions must be at least 2 (the first version is not timed)")
    device = "cpu" if args.cpu else "cuda:0"

    def sync():
        if not args.cpu:
            torch.cuda.synchronize()

    per = args.bytes // 8
    src = {f"layers.{i}.weight": torch.empty(per, dtype=torch.uint8, device=device) for i in range(8)}
    out = {name: torch.empty_like(t) for name, t in src.items()}
    model = f"weights-cuda-{os.getpid()}"
    publish_s, pull_s = [], []
    for v in range(1, args.versions + 1):
        for i, t in enumerate(src.values()):
            t.fill_((v * 13 + i) % 251)
        sync()
        t0 = time.perf_counter()
        plexus_torch.weights.publish(model, src, v)
        t1 = time.perf_counter()
        got = plexus_torch.weights.pull(model, out, newer_than=v - 1, timeout=60)
        sync()
        t2 = time.perf_counter()
        if got != v:
            print(f"FAIL pulled version {got}, published {v}")
            return 1
        for name in src:
            if not torch.equal(src[name], out[name]):
                print(f"FAIL version {v}: {name} pulled is not what was published")
                return 1
        if v > 1:  # the first pays the store's first touch of its memory
            publish_s.append(t1 - t0)
            pull_s.append(t2 - t1)
    gb = per * 8 / 1e9

    def rate(times):
        return gb / statistics.median(times)

    # torch's own copies of the same bytes, median of 3.
    pageable, to_pinned, from_pinned = [], [], []
    pinned = {n: torch.empty(per, dtype=torch.uint8, pin_memory=not args.cpu) for n in src}
    for _ in range(3):
        t0 = time.perf_counter()
        for t in src.values():
            t.cpu()
        sync()
        pageable.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for n, t in src.items():
            pinned[n].copy_(t)
        sync()
        to_pinned.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for n, t in out.items():
            t.copy_(pinned[n])
        sync()
        from_pinned.append(time.perf_counter() - t0)
    print(f"FIGURE {gb:.2f} GB in 8 tensors on {device}, versions 2-{args.versions} exact: "
          f"publish {rate(publish_s):.1f} GB/s ({statistics.median(publish_s) * 1e3:.0f} ms), "
          f"pull {rate(pull_s):.1f} GB/s ({statistics.median(pull_s) * 1e3:.0f} ms)")
    print(f"FIGURE torch, same bytes: .cpu() {rate(pageable):.1f} GB/s, to pinned "
          f"{rate(to_pinned):.1f} GB/s, from pinned {rate(from_pinned):.1f} GB/s; publish/.cpu() "
          f"time {statistics.median(publish_s) / statistics.median(pageable):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
