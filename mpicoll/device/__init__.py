"""Where the data lives: array adapters (NumPy, CuPy), GPU transports, CUDA probes, MPS.

What lives here: :mod:`.arrays` (the adapters that make CuPy arrays look like
NumPy ones to the algorithms; it re-exports the names of the next two),
:mod:`.arena` (pinned host staging), :mod:`.transport` (the staged and CUDA-aware
transports and their choice), :mod:`.ipc` (the CUDA IPC transport between
ranks of a node), :mod:`.peer_memory` (how a rank reaches its node peers' memory:
symmetric windows, single-copy reads, mailboxes; the ``shm`` algorithms stand on it),
:mod:`.reduce` (the local reduction step on any memory),
:mod:`.cuda_probe` / :mod:`.cuda_driver` (whether MPI is CUDA-aware; the
driver calls), :mod:`.gpu_env` (the UCX set-up of ``python -m mpicoll.gpu
env``) and :mod:`.mps` (whether an MPS daemon serves the ranks of a GPU).

May import: ``core``.
"""
