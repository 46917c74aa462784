#!/usr/bin/python3
"""gloo_bench: commbench's peer harness for torch.distributed's gloo backend.

    RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p \\
        /usr/bin/python3 gloo_bench.py plan.txt raw.txt

It runs the cases of a commbench plan file (format: bench/plan.go) with
the torch.distributed calls that match commbench's ops, timed and checked
the way bench.Run does it, and rank 0 writes the raw results (format:
bench/result.go) for `commbench compare` to summarise. Each timed
iteration is timed alone (from Python, as a torch program sees it); the
times are then combined across ranks with MAX. torch's all_reduce, reduce
and broadcast work in place, so those are timed in place. Cases gloo
cannot run (reduce_scatter, avg) are written as "skip" lines.

commbench compare starts one process per rank (with launch.Run) and
meets them at init_method tcp://MASTER_ADDR:MASTER_PORT.
"""

import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

TAG = 7

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
    "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
}
REDOPS = {
    "sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND, "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}
REDUCING = ("allreduce", "reduce", "reducescatter")
BLOCKED = ("allgather", "reducescatter", "alltoall")


class Skip(Exception):
    """A case this harness cannot run."""


def read_plan(path):
    with open(path) as f:
        lines = [l.strip() for l in f]
    if not lines or lines[0] != "gocomm-bench-plan 1":
        raise SystemExit(f"gloo_bench: {path} is not a plan file")
    plan = {"check": False, "cases": []}
    for l in lines[1:]:
        if not l or l.startswith("#"):
            continue
        f = l.split()
        if f[0] == "dtype":
            plan["dtype"] = f[1]
        elif f[0] == "redop":
            plan["redop"] = f[1]
        elif f[0] == "check":
            plan["check"] = f[1] == "1"
        elif f[0] == "case" and len(f) == 6:
            plan["cases"].append((f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5])))
        else:
            raise SystemExit(f"gloo_bench: bad plan line {l!r}")
    return plan


def mix32(x):
    """MurmurHash3's 32-bit finaliser, as bench/check.go's mix32 (numpy
    uint32 arithmetic wraps as Go's does)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> np.uint32(13))
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> np.uint32(16))


def pattern(dtype, redop, r, off, n):
    """The check pattern of bench/check.go (Pattern), as int64 numpy."""
    h = mix32(np.arange(off, off + n, dtype=np.uint32)) >> np.uint32(8)
    if redop == "prod":
        v = (h + np.uint32(r)) % np.uint32(2)
    else:
        rng = 8 if dtype in ("int8", "uint8", "bfloat16") else 64
        v = (h + np.uint32(3 * r)) % np.uint32(rng)
    return v.astype(np.int64) + 1


def expected(dtype, redop, world, off, n):
    """bench/check.go's Expected: the reduction of the pattern over ranks."""
    acc = pattern(dtype, redop, 0, off, n)
    for r in range(1, world):
        v = pattern(dtype, redop, r, off, n)
        if redop == "prod":
            acc = acc * v
        elif redop == "min":
            acc = np.minimum(acc, v)
        elif redop == "max":
            acc = np.maximum(acc, v)
        elif redop == "band":
            acc = acc & v
        elif redop == "bor":
            acc = acc | v
        elif redop == "bxor":
            acc = acc ^ v
        else:
            acc = acc + v
    return acc


def wrong(got, want):
    """The number of elements of tensor got that differ from numpy want."""
    return int(np.count_nonzero(got.to(torch.float64).numpy() != want.astype(np.float64)))


def make_case(op, nbytes, root, plan, rank, world):
    """Returns (run_once, prepare, count_wrong) for one case."""
    dtname, redop = plan["dtype"], plan["redop"]
    dt = DTYPES[dtname]
    es = torch.tensor([], dtype=dt).element_size()
    count = nbytes // es
    blk = count // world if op in BLOCKED else count
    if op in REDUCING and redop not in REDOPS:
        raise Skip(f"gloo has no {redop} reduction")
    rop = REDOPS.get(redop)
    nsend = blk if op == "allgather" else count
    nrecv = blk if op == "reducescatter" else count
    send = torch.zeros(nsend, dtype=dt)
    recv = torch.zeros(nrecv, dtype=dt)
    nxt, prv = (rank + 1) % world, (rank + world - 1) % world

    if op == "allreduce":
        def once():
            dist.all_reduce(recv, op=rop)
    elif op == "reduce":
        def once():
            dist.reduce(recv, dst=root, op=rop)
    elif op == "broadcast":
        def once():
            dist.broadcast(recv, src=root)
    elif op == "allgather":
        outs = list(recv.chunk(world))

        def once():
            dist.all_gather(outs, send)
    elif op == "reducescatter":
        ins = list(send.chunk(world))

        def once():
            dist.reduce_scatter(recv, ins, op=rop)
    elif op == "alltoall":
        def once():
            dist.all_to_all_single(recv, send)
    elif op == "sendrecv":
        def once():
            req = dist.irecv(recv, src=prv, tag=TAG)
            dist.send(send, dst=nxt, tag=TAG)
            req.wait()
    elif op == "pingpong":
        if rank == 0:
            def once():
                dist.send(send, dst=1, tag=TAG)
                dist.recv(recv, src=1, tag=TAG)
        elif rank == 1:
            def once():
                dist.recv(recv, src=0, tag=TAG)
                dist.send(send, dst=0, tag=TAG)
        else:
            def once():
                pass
    elif op == "barrier":
        def once():
            dist.barrier()
    else:
        raise SystemExit(f"gloo_bench: unknown op {op}")

    def pat(r, off, n):
        return torch.from_numpy(pattern(dtname, redop, r, off, n)).to(dt)

    # In-place ops reduce or receive into recv: their input is recv.
    inplace = op in ("allreduce", "reduce", "broadcast")

    def prepare():
        if op == "barrier":
            return
        if op == "broadcast":
            recv.copy_(pat(rank, 0, count) if rank == root else torch.zeros(count, dtype=dt))
        elif inplace:
            recv.copy_(pat(rank, 0, count))
        else:
            send.copy_(pat(rank, 0, nsend))
            recv.zero_()

    def count_wrong():
        if op == "allreduce" or (op == "reduce" and rank == root):
            return wrong(recv, expected(dtname, redop, world, 0, count))
        if op == "broadcast":
            return wrong(recv, pattern(dtname, redop, root, 0, count))
        if op == "allgather":
            return sum(wrong(recv[p * blk:(p + 1) * blk], pattern(dtname, redop, p, 0, blk)) for p in range(world))
        if op == "reducescatter":
            return wrong(recv, expected(dtname, redop, world, rank * blk, blk))
        if op == "alltoall":
            return sum(wrong(recv[p * blk:(p + 1) * blk], pattern(dtname, redop, p, rank * blk, blk))
                       for p in range(world))
        if op == "sendrecv":
            return wrong(recv, pattern(dtname, redop, prv, 0, count))
        if op == "pingpong" and rank in (0, 1):
            return wrong(recv, pattern(dtname, redop, 1 - rank, 0, count))
        return 0

    return once, prepare, count_wrong


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: gloo_bench.py plan.txt raw.txt")
    plan = read_plan(sys.argv[1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), os.environ["MASTER_PORT"]
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
    if plan["dtype"] not in DTYPES:
        raise SystemExit(f"gloo_bench: type {plan['dtype']} has no torch counterpart here")
    lines = ["gocomm-bench-raw 1", f"ranks {world}"]
    for op, nbytes, warmup, iters, root in plan["cases"]:
        try:
            once, prepare, count_wrong = make_case(op, nbytes, root, plan, rank, world)
            prepare()
            # gloo raises at once for what it does not support, on every
            # rank alike, so a first call tells.
            dist.barrier()
            once()
        except Skip as e:
            lines.append(f"skip {op} {nbytes} {e}")
            continue
        except RuntimeError as e:
            reason = " ".join(str(e).split())[:120]
            lines.append(f"skip {op} {nbytes} torch: {reason}")
            continue
        dist.barrier()
        for _ in range(max(0, warmup - 1)):
            once()
        times = torch.zeros(iters, dtype=torch.float64)
        # One clock read per iteration, as commbench's own loop (bench/run.go).
        l0 = prev = time.perf_counter()
        for it in range(iters):
            once()
            now = time.perf_counter()
            times[it] = now - prev
            prev = now
        loop = torch.tensor([(prev - l0) / iters], dtype=torch.float64)
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        dist.all_reduce(loop, op=dist.ReduceOp.MAX)
        nwrong = -1
        if plan["check"]:
            prepare()
            once()
            w = torch.tensor([count_wrong()], dtype=torch.int64)
            dist.all_reduce(w)
            nwrong = int(w.item())
        lines.append(f"case {op} {nbytes} {warmup} {root} {nwrong} " + " ".join(f"{t * 1e6:.9g}" for t in times.tolist()))
        lines.append(f"loop {loop.item() * 1e6:.9g}")
    if rank == 0:
        with open(sys.argv[2], "w") as f:
            f.write("\n".join(lines) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
