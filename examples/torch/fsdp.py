"""Fully sharded data parallel training on CPU over the "mpicoll" backend (FSDP2 and FSDP1).

Run: mpirun -n 3 python examples/torch/fsdp.py [--api fsdp2|fsdp1|both] [--steps 8]
     [--backend mpicoll|gloo] [--save params.pt]

torch's ``fully_shard`` (FSDP2, on a CPU device mesh) and
``FullyShardedDataParallel`` (FSDP1) keep each parameter sharded over the
ranks: before a layer runs they all-gather its parameters
(``all_gather_into_tensor``, in place: each rank's shard is its block of the
output), after backward they reduce-scatter its gradients
(``reduce_scatter_tensor``). Every rank starts from the same weights (one
seed) and trains on its own batch. Rank 0 prints the loss per step and a
checksum of the full (unsharded) parameters; ``--save`` writes them, so that
two runs (two backends) can be compared exactly.
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn

import mpicoll.torch  # noqa: F401  (registers the "mpicoll" backend)


def model_for(width):
    """The small model, with the same initial weights on every rank."""
    torch.manual_seed(1234)                 # the same initial weights on every rank
    return nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                         nn.Linear(width, 1))


def shard(model, api, world):
    """``model`` wrapped by ``api``; returns (module to call, function giving full params)."""
    if api == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)

        def full():
            return [p.full_tensor().detach().reshape(-1) for p in model.parameters()]
        return model, full
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    wrapped = FSDP(model, device_id=torch.device("cpu"), use_orig_params=True)

    def full():
        with FSDP.summon_full_params(wrapped):
            return [p.detach().clone().reshape(-1) for p in wrapped.parameters()]
    return wrapped, full


def train(api, args, rank, world):
    """Train a fresh model under ``api`` on this rank's batches; the full parameters."""
    module, full = shard(model_for(args.width), api, world)
    opt = torch.optim.SGD(module.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    true_w = torch.linspace(-1, 1, 16)
    for step in range(args.steps):
        x = torch.randn(8, 16, generator=gen)
        y = (x @ true_w).unsqueeze(1)
        opt.zero_grad()
        loss = nn.functional.mse_loss(module(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and not args.quiet:
            print(f"{api} step {step} loss {loss.item():.6f}", flush=True)
    return torch.cat(full()).double()


def main():
    """Train under each API asked for; print (and save) the full parameters."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", choices=["fsdp2", "fsdp1", "both"], default="both")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--width", type=int, default=32, help="hidden layer width")
    p.add_argument("--backend", default="mpicoll")
    p.add_argument("--save", help="rank 0 saves {api: full parameters} here (torch.save)")
    p.add_argument("--quiet", action="store_true", help="print only the checksums")
    args = p.parse_args()

    dist.init_process_group(backend=args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    saved = {}
    for api in (["fsdp2", "fsdp1"] if args.api == "both" else [args.api]):
        flat = train(api, args, rank, world)
        saved[api] = flat
        if rank == 0:
            print(f"{args.backend} {api}: {world} ranks, {args.steps} steps; parameter checksum "
                  f"{flat.sum().item():.12e} {flat.abs().sum().item():.12e}", flush=True)
    if rank == 0 and args.save:
        torch.save(saved, args.save)
    dist.barrier()                          # every rank done before any tears down
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
