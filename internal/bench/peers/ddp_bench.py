#!/usr/bin/python3
"""ddp_bench: commbench ddp's peer harness, torch DistributedDataParallel on gloo.

    RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p \\
        /usr/bin/python3 ddp_bench.py model.txt raw.txt [-w W] [-i I] [--rotate K] [--check]

model.txt lists a model's parameter shapes (format: internal/models,
WriteShapes); the module built here has exactly those parameters, float32,
registered in that order. Its forward adds one element of every parameter,
scaled by rank+1, into a chain (parameter 0 first), so backward produces
every gradient, in full, in reverse order, as a network's backward does:
each costs about a memset of the parameter's size, which is the step's
compute.

Modes (rank 0 writes one "mode" line each, format: bench/ddp.go
WriteDDPRaw, times in microseconds, each iteration the slowest rank's):

  ddp        zero_grad(set_to_none), forward through DDP, backward with
             DDP's gradient averaging (gloo, default buckets: 25 MiB, first
             1 MiB, rebuilt after the first step)
  plain      the same step under ddp.no_sync(): the same module, forward and
             backward, no communication. commbench reports ddp - plain as
             DDP's cost. ddp and plain steps alternate (which goes first
             alternates too), so the machine's drift hits both alike.
  pertensor  dist.all_reduce of each gradient-shaped tensor in reverse order,
             then a division by the world size (gloo has no AVG)
  flat       dist.all_reduce of one tensor of every parameter, then the division

With --check one more step of each mode is verified: DDP's gradients must
be the average over ranks of rank+1 at element 0 and zero elsewhere; plain's
this rank's own; the all-reduces' tensors the average of rank+1.

commbench ddp starts one process per rank (launch.Run) and meets them at
init_method tcp://MASTER_ADDR:MASTER_PORT.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def read_model(path):
    """Reads internal/models' text form: (name, [(tensor name, shape)])."""
    with open(path) as f:
        lines = [l.strip() for l in f]
    if not lines or lines[0] != "gocomm-model 1":
        raise SystemExit(f"ddp_bench: {path} is not a model file")
    name, tensors = "", []
    for i, l in enumerate(lines[1:], 2):
        if not l or l.startswith("#"):
            continue
        f = l.split()
        if f[0] == "model" and len(f) == 2:
            name = f[1]
        elif f[0] == "tensor" and len(f) >= 3:
            shape = [int(d) for d in f[2:]]
            if min(shape) < 1:
                raise SystemExit(f"ddp_bench: {path}:{i}: bad shape {l!r}")
            tensors.append((f[1], shape))
        else:
            raise SystemExit(f"ddp_bench: {path}:{i}: bad line {l!r}")
    return name, tensors


class Shapes(nn.Module):
    """A module whose parameters have the given shapes; forward touches one
    element of each, so that backward produces every gradient."""

    def __init__(self, shapes, scale):
        super().__init__()
        self.params = nn.ParameterList([nn.Parameter(torch.zeros(s)) for s in shapes])
        self.scale = scale

    def forward(self, x):
        for p in self.params:
            x = x + p.view(-1)[0] * self.scale
        return x


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def timed(steps, iters):
    """Runs iters rounds of the given step functions (their order rotating
    round by round), timing each call; returns one list of times and the
    loop time per step for each function."""
    times = [torch.zeros(iters, dtype=torch.float64) for _ in steps]
    total = [0.0] * len(steps)
    for it in range(iters):
        for k in range(len(steps)):
            j = (k + it) % len(steps)
            t0 = time.perf_counter()
            steps[j]()
            dt = time.perf_counter() - t0
            times[j][it] = dt
            total[j] += dt
    return times, [t / iters for t in total]


def main():
    ap = argparse.ArgumentParser(prog="ddp_bench.py")
    ap.add_argument("model")
    ap.add_argument("raw")
    ap.add_argument("-w", type=int, default=3)
    ap.add_argument("-i", type=int, default=10)
    ap.add_argument("--rotate", type=int, default=0)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    name, tensors = read_model(a.model)
    shapes = [s for _, s in tensors]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), os.environ["MASTER_PORT"]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
    avg = (world + 1) / 2  # the average over ranks of rank+1

    results = {}  # mode -> (times tensor, loop, wrong)

    def ddp_modes():
        model = DistributedDataParallel(Shapes(shapes, float(rank + 1)), broadcast_buffers=False)
        params = list(model.parameters())
        x = torch.zeros(())

        def zero():
            for p in params:
                p.grad = None

        def synced():
            zero()
            model(x).backward()

        def unsynced():
            zero()
            with model.no_sync():
                model(x).backward()

        def wrong_grads(want0):
            w = 0
            for p in params:
                g = p.grad.view(-1)
                w += int(g[0].item() != want0) + int(torch.count_nonzero(g[1:]).item())
            return w

        dist.barrier()
        for _ in range(a.w):
            synced()
            unsynced()
        steps = [synced, unsynced] if (a.rotate % 2 == 0) else [unsynced, synced]
        times, loops = timed(steps, a.i)
        out = dict(zip(("ddp", "plain") if a.rotate % 2 == 0 else ("plain", "ddp"), zip(times, loops)))
        wrong = {"ddp": -1, "plain": -1}
        if a.check:
            synced()
            wrong["ddp"] = wrong_grads(avg)
            unsynced()
            wrong["plain"] = wrong_grads(float(rank + 1))
        for mode in ("ddp", "plain"):
            results[mode] = (out[mode][0], out[mode][1], wrong[mode])
        del model, params

    def allreduce_mode(mode):
        if mode == "flat":
            bufs = [torch.zeros(sum(numel(s) for s in shapes))]
        else:
            bufs = [torch.zeros(s) for s in reversed(shapes)]

        def step():
            for b in bufs:
                dist.all_reduce(b)
                b.div_(world)

        dist.barrier()
        for _ in range(a.w):
            step()
        times, loops = timed([step], a.i)
        wrong = -1
        if a.check:
            for b in bufs:
                b.fill_(rank + 1)
            step()
            wrong = sum(int(torch.count_nonzero(b != avg).item()) for b in bufs)
        results[mode] = (times[0], loops[0], wrong)

    order = ["ddp", "pertensor", "flat"]
    k = a.rotate % len(order)
    for mode in order[k:] + order[:k]:
        if mode == "ddp":
            ddp_modes()
        else:
            allreduce_mode(mode)

    lines = ["gocomm-ddp-raw 1", f"ranks {world}", f"model {name}"]
    for mode in ("pertensor", "flat", "ddp", "plain"):
        times, loop, wrong = results[mode]
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        lt = torch.tensor([loop], dtype=torch.float64)
        dist.all_reduce(lt, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(w)
        nwrong = int(w.item()) if wrong >= 0 else -1
        lines.append(f"mode {mode} {nwrong} {lt.item() * 1e6:.9g} 0 " + " ".join(f"{t * 1e6:.9g}" for t in times.tolist()))
    if rank == 0:
        with open(a.raw, "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
