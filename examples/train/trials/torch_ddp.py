"""The -elastic training of examples/train, in PyTorch, for the elastic
recovery comparison (examples/train/trials): the same model shape (16
features, tanh hidden layers, 4 classes), the same kind of data (a mixture
of Gaussian clusters per class, generated from a seed), SGD with momentum
0.9, a global batch shared by the ranks. DDP over gloo, run by torchrun.

torchrun restarts every worker after a failure, so the script saves a
checkpoint (parameters, momentum, step) every --ckpt-every steps (rank 0,
written to a temporary file and renamed) and resumes from it. Rank 0 prints
a timestamped line per step; the first step after a restart says so.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, CLASSES, CLUSTERS, SPREAD = 16, 4, 3, 2.0


def make_data(seed, n):
    g = torch.Generator().manual_seed(seed)
    centers = 1.6 * torch.randn(CLASSES * CLUSTERS, FEATURES, generator=g)

    def gen(n):
        y = torch.randint(CLASSES, (n,), generator=g)
        c = y * CLUSTERS + torch.randint(CLUSTERS, (n,), generator=g)
        x = centers[c] + SPREAD * torch.randn(n, FEATURES, generator=g)
        return x, y

    return gen(n), gen(n // 4)


def model(hidden, layers):
    mods, d = [], FEATURES
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.Tanh()]
        d = hidden
    mods.append(nn.Linear(d, CLASSES))
    return nn.Sequential(*mods)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step at the job's size")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--samples", type=int, default=16384)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ckpt", required=True, help="checkpoint file")
    p.add_argument("--ckpt-every", type=int, default=1)
    a = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    print(f"torch: rank {rank} is pid {os.getpid()} (restart {restarts})", flush=True)
    (xs, ys), (tx, ty) = make_data(a.seed, a.samples)
    torch.manual_seed(a.seed)
    net = model(a.hidden, a.layers)
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)
    step = 0
    if os.path.exists(a.ckpt):
        ck = torch.load(a.ckpt)
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        step = ck["step"]
    ddp = DDP(net)  # broadcasts rank 0's parameters
    glob = a.batch * size
    per_epoch = a.samples // glob
    total = per_epoch * a.epochs
    resumed = restarts > 0
    if rank == 0:
        print(f"torch: {size} ranks, restart {restarts}, from step {step}/{total}, unix ms {int(time.time() * 1000)}", flush=True)
    lossf = nn.CrossEntropyLoss(reduction="sum")
    perm, perm_epoch = None, -1
    while step < total:
        epoch, s = step // per_epoch + 1, step % per_epoch
        if perm_epoch != epoch:
            perm, perm_epoch = torch.randperm(a.samples, generator=torch.Generator().manual_seed(a.seed * 1000 + epoch)), epoch
        idx = perm[s * glob:(s + 1) * glob][rank::size]
        opt.zero_grad()
        # Summed over the rank's share, scaled so DDP's average is the
        # global batch's mean.
        loss = lossf(ddp(xs[idx]), ys[idx]) * (size / glob)
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            if step % a.ckpt_every == 0:
                tmp = a.ckpt + ".tmp"
                torch.save({"model": net.state_dict(), "optim": opt.state_dict(), "step": step}, tmp)
                os.replace(tmp, a.ckpt)
            now = int(time.time() * 1000)
            if resumed:
                print(f"torch: {size} ranks stepping at step {step}, unix ms {now}", flush=True)
                resumed = False
            print(f"torch: step {step}/{total} on {size} ranks, unix ms {now}", flush=True)
    with torch.no_grad():
        mine = torch.arange(rank, len(ty), size)
        correct = (net(tx[mine]).argmax(1) == ty[mine]).sum().float()
        n = torch.tensor(float(len(mine)))
        dist.all_reduce(correct)
        dist.all_reduce(n)
    flat = torch.cat([q.detach().flatten() for q in net.parameters()])
    sums = [torch.zeros(1, dtype=torch.float64) for _ in range(size)]
    dist.all_gather(sums, flat.double().sum().reshape(1))
    same = all(float(x) == float(sums[0]) for x in sums)
    if rank == 0:
        print(f"torch: done: {size} ranks, test accuracy {100 * float(correct / n):.2f}%, parameters identical: {same}", flush=True)
    # No destroy_process_group: with Debian's torch 1.13 on this machine
    # a gloo rank sometimes spins in it after the job is done.
    dist.barrier()


if __name__ == "__main__":
    main()
