"""Rank-ordered printing for the torch examples: every rank's line goes to rank 0, in order.

The seed warns that plain ``print`` calls from several ranks interleave; the examples
call :func:`print_ranks` instead (every rank must call it, as for a collective), through
torch.distributed itself, so that their output reads (and parses) line by line, as the
NumPy ports' does (``examples/_seedprint.py``).
"""
import torch.distributed as dist


def print_ranks(text):
    """Print each rank's ``text`` (None prints nothing) on rank 0, in rank order."""
    texts = [None] * dist.get_world_size()
    dist.all_gather_object(texts, text)
    if dist.get_rank() == 0:
        for t in texts:
            if t is not None:
                print(t)
        print(flush=True)
