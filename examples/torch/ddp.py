"""DistributedDataParallel over the "mpicoll" backend: a small model trained for a few steps.

Run: mpirun -n 4 python -m mpicoll.run examples/torch/ddp.py [--steps 20] [--backend mpicoll|gloo]

Every rank trains the same model (DDP broadcasts rank 0's parameters at start)
on its own shard of a synthetic regression problem; DDP averages the gradients
with all_reduce after every backward pass, so the parameters stay identical on
every rank. Each rank's loss per step is printed after the training, in rank
order (print_ranks, _rankprint.py: collected outside the timed steps); rank 0
prints the steps per second and a checksum of the final parameters, which is
the same over any backend (gloo included) up to float rounding.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import mpicoll.torch  # noqa: F401  (registers the "mpicoll" backend)

from _rankprint import print_ranks


def main():
    """Train the model for --steps steps on this rank's shard and print the losses."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--backend", default="mpicoll")
    p.add_argument("--width", type=int, default=256, help="hidden layer width")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args()

    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank % torch.cuda.device_count()) \
        if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(1234 + rank)          # different initial weights: DDP broadcasts rank 0's
    model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(),
                          nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 1)).to(device)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    true_w = torch.linspace(-1, 1, 64)
    dist.barrier()
    t0 = time.perf_counter()
    losses = []
    for _ in range(args.steps):
        x = torch.randn(args.batch, 64, generator=gen)
        y = (x @ true_w).unsqueeze(1) + 0.1 * torch.randn(args.batch, 1, generator=gen)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if not args.quiet:
        print_ranks("\n".join(f"rank {rank} step {step} loss {loss.item():.6f}"
                               for step, loss in enumerate(losses)))
    flat = torch.cat([q.detach().reshape(-1).double().cpu() for q in model.parameters()])
    if rank == 0:
        print(f"{args.backend}: {world} ranks, {args.steps} steps in {elapsed:.3f} s "
              f"({args.steps / elapsed:.1f} steps/s); parameter checksum "
              f"{flat.sum().item():.12e} {flat.abs().sum().item():.12e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
