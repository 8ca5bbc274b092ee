"""The bench's cases: buffers and exact data of one primitive at one size, on NumPy or CuPy.

Each primitive's spec (layout, expected data, bus-bandwidth factor: nccl-tests'
model) lives with the primitive (:mod:`mpicoll.calls`, ``Primitive.spec``);
:data:`SPECS` reads them from the registry, so a primitive defined by a
plug-in is measured like the others. :class:`Case` holds one primitive at one
size on this rank and makes its call through the public face.
"""
import contextlib

import numpy as np

import mpicoll
from mpicoll.calls import DEFINED
from mpicoll.calls.spec import cap as _cap
from mpicoll.calls.spec import sentinel as _sentinel
from mpicoll.core.views import LiveView

__all__ = ["SPECS", "Declared", "Case", "busbw_factor", "ArrayModule"]

_CHUNK = 1 << 20       # elements generated/compared at a time (bounds check memory)


def busbw_factor(primitive, n):
    """nccl-tests' bus-bandwidth factor of ``primitive`` at ``n`` ranks.

    None for barrier: no bandwidth. The primitive's spec says it
    (:meth:`mpicoll.calls.spec.Spec.busbw`).

    The v-collectives take their block variant's (nccl-tests has none; the
    bench gives every rank the same count, as OSU's v-benchmarks do); the
    scans take 1, like reduce: every rank's whole vector crosses a link.
    """
    return SPECS[primitive].busbw(n)


def add_xp_arguments(parser, xp_help):
    """Add ``--xp numpy|shm|cupy``, ``--shared-result`` and ``--device N`` to ``parser``.

    They choose the buffers :class:`ArrayModule` makes.
    """
    parser.add_argument("--xp", choices=("numpy", "shm", "cupy"), default="numpy",
                        help="array module of the buffers (default numpy); shm: NumPy arrays "
                             "in the node's shared memory (mpicoll.shm.empty: symmetric, the "
                             "shm algorithms read them in place; one node only); " + xp_help)
    parser.add_argument("--shared-result", action="store_true",
                        help="with --xp shm: the shm rows of allreduce and allgather write "
                             "their result into one array for the whole node "
                             "(mpicoll.shm.empty(..., shared=True): the result stays in the "
                             "segment, nothing is copied back); the other rows keep a result "
                             "per rank")
    parser.add_argument("--device", type=int, default=None, metavar="N",
                        help="with --xp cupy: use GPU N on every rank (default: MPICOLL_DEVICE, "
                             "else local rank mod GPU count)")


class ArrayModule:
    """NumPy or CuPy buffers behind one small interface.

    ``ArrayModule("cupy", comm, device)`` is collective: every rank checks
    CuPy, the ranks agree (so a rank without a GPU ends the job with its
    reason instead of leaving the others waiting), then each rank selects
    its GPU with :func:`mpicoll.gpu.select_device` (``device`` or
    ``MPICOLL_DEVICE`` overrides local rank mod GPU count) and the ranks
    exchange what they got, for the provenance and the NCCL column.
    """

    def __init__(self, name="numpy", comm=None, device=None, shared_result=False):
        self.name = name
        self.comm = comm
        self.shared_result = False
        self._made = []            # shm arrays made for the current size (freed by release)
        self.selection = None      # this rank's select_device() result (cupy)
        self.gpus = None           # every rank's GPU, rank order (cupy)
        self.gpu_id = None         # "host pci-bus-id": equal on two ranks = one GPU
        self.path = "host"         # how device buffers reach MPI (cupy: cuda-aware, staged)
        self.collectives = "host"  # MPI's own collectives on them (cupy: cuda-aware, staged)
        if name == "numpy":
            self.xp = np
        elif name == "shm":
            self._use_shm(comm)
            self.shared_result = shared_result
        elif name == "cupy":
            self._use_cupy(comm, device)
        else:
            raise SystemExit(f"--xp: expected numpy, shm or cupy; got {name!r}")
        if shared_result and name != "shm":
            raise SystemExit("--shared-result: only with --xp shm (node-shared arrays)")

    def _use_shm(self, comm):
        from mpi4py import MPI
        comm = comm if comm is not None else MPI.COMM_WORLD
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        one = comm.allreduce(int(node.Get_size() == comm.Get_size()), op=MPI.MIN)
        node.Free()
        if not one:
            raise SystemExit("--xp shm: the ranks must share one node (shared-memory arrays "
                             "are per node)")
        self.xp = np
        self.comm = comm

    def _use_cupy(self, comm, device):
        from mpi4py import MPI

        from mpicoll.gpu import cupy_status, select_device
        comm = comm if comm is not None else MPI.COMM_WORLD
        every = comm.allgather(cupy_status())
        bad = [(r, why) for r, (ok, why) in enumerate(every) if not ok]
        if bad:
            raise SystemExit(f"--xp cupy: no usable GPU on rank {bad[0][0]}: {bad[0][1]}")
        try:
            self.selection = select_device(comm, device)
        except RuntimeError as exc:
            where = f"--device {device}" if device is not None else "--xp cupy"
            raise SystemExit(f"{where}: {exc}") from None
        import cupy
        self.xp = cupy
        try:
            self._path = _device_path_info()
        except mpicoll.ArgumentError as exc:        # e.g. MPICOLL_CUDA_AWARE=maybe
            raise SystemExit(f"--xp cupy: {exc}") from None
        self.path = self._path["device_path"]["path"]
        self.collectives = self._path["device_path"]["collectives"]   # native on device arrays
        dev = self.selection["device"]
        name = cupy.cuda.runtime.getDeviceProperties(dev)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        try:
            bus = cupy.cuda.Device(dev).pci_bus_id
        except Exception:  # old CuPy: fall back to the device number
            bus = f"device {dev}"
        host = MPI.Get_processor_name()
        self.gpu_id = f"{host} {bus}"
        mine = dict(self.selection, rank=comm.Get_rank(), host=host, name=name,
                    pci_bus_id=bus)
        self.gpus = comm.allgather(mine)
        from mpicoll.gpu import mps_status
        self.mps = mps_status(comm)      # collective: ranks sharing a GPU, MPS on or off

    def provenance(self):
        """What the provenance records about the buffers (collective).

        On the host, how the shm algorithms reach peers' memory (and why not in one copy);
        GPU details with cupy.
        """
        if self.name != "cupy":
            from mpi4py import MPI
            shm = mpicoll.shm.report(self.comm if self.comm is not None else MPI.COMM_WORLD)
            shm.pop("windows", None)
            if self.name == "shm":
                shm["buffers"] = ("symmetric (mpicoll.shm.empty)" + (
                    "; shm rows of allreduce/allgather: one result per node (shared=True)"
                    if self.shared_result else ""))
            return {"xp": self.name, "shm": shm}
        rt = self.xp.cuda.runtime
        return {"xp": "cupy", "device_path": self._path["device_path"],
                "cuda_aware_report": self._path["report"], "mps": self.mps,
                "gpu": {"cupy": self.xp.__version__,
                        "cuda_runtime": _cuda_version(rt.runtimeGetVersion),
                        "cuda_driver": _cuda_version(rt.driverGetVersion),
                        "ranks": self.gpus}}

    def empty(self, n, dtype, shared=False):
        """An array of ``n`` elements of ``dtype``.

        With ``--xp shm``: collective, in the node's shared memory; ``shared``: one array
        for the whole node.
        """
        if self.name == "shm":
            a = mpicoll.shm.empty(n, dtype, comm=self.comm, shared=shared)
            self._made.append(a)
            return a
        return self.xp.empty(n, dtype=dtype)

    def empty_on(self, mine, n, dtype):
        """:meth:`empty` where ``mine`` (a buffer only some ranks have), else None.

        With ``--xp shm`` made on every rank alike (collective), returned where ``mine``.
        """
        if self.name == "shm":
            a = self.empty(n, dtype)
            return a if mine else None
        return self.empty(n, dtype) if mine else None

    def release(self):
        """Free the shared-memory arrays made since the last release (collective)."""
        while self._made:
            mpicoll.shm.free(self._made.pop())

    def to_host(self, a):
        """``a`` as a host (NumPy) array."""
        return a if self.xp is np else self.xp.asnumpy(a)

    def put(self, dst, lo, host):
        """Write host array ``host`` into ``dst`` from element ``lo`` on."""
        dst[lo:lo + host.size] = host if self.xp is np else self.xp.asarray(host)

    def stream_ptr(self):
        """The current CUDA stream's handle (0 with NumPy): where NCCL calls are queued."""
        return 0 if self.xp is np else self.xp.cuda.get_current_stream().ptr

    def sync(self):
        """Wait for the device's current stream (nothing with NumPy)."""
        # Kernels and NCCL calls run asynchronously on the current stream: a
        # timed call is complete only once the stream has drained.
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()


def _device_path_info():
    from mpicoll.gpu import cuda_aware_report, device_path
    return {"device_path": device_path(), "report": cuda_aware_report()}


def _cuda_version(fn):
    """12040 -> '12.4' (CUDA's encoding); None when the call fails."""
    try:
        v = int(fn())
    except Exception:  # provenance never fails a run
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


class Case:
    """One primitive at one size on this rank: buffers, check data, the call."""

    def __init__(self, spec, nbytes, *, dtype, op, opname, root, comm, am):
        self.spec, self.dtype, self.op, self.opname = spec, np.dtype(dtype), op, opname
        self.comm, self.am = comm, am
        self.n, self.rank = comm.Get_size(), comm.Get_rank()
        self.root = root if spec.rooted else None
        self.count, self.block = spec.layout(nbytes, self.dtype.itemsize, self.n)
        self.bytes = self.count * self.dtype.itemsize
        self.send = self.recv = None
        spec.alloc(self)
        # --shared-result: the shm row of allreduce/allgather writes one result for the node
        self.shared_recv = None
        if getattr(am, "shared_result", False) and spec.name in ("allreduce", "allgather"):
            self.shared_recv = am.empty(self.recv.size, self.dtype, shared=True)
        # Reduction pattern: rank r holds (g + r) mod M at global index g.
        cap = _cap(self.dtype)
        exact_sum = self.dtype.kind in "iu"          # integer sums wrap exactly
        self.mod = cap if (opname != "sum" or exact_sum) else max(1, cap // self.n)

    # -- what auto sees and what the table shows --------------------------
    @property
    def call_nbytes(self):
        """The ``nbytes`` that ``algorithm="auto"`` sees (:meth:`Spec.call_nbytes`)."""
        return self.spec.call_nbytes(self)

    @property
    def call_count(self):
        """The ``count`` that ``algorithm="auto"`` sees (:meth:`Spec.call_count`)."""
        return self.spec.call_count(self)

    def busbw_factor(self):
        """nccl-tests' bus-bandwidth factor of this case's primitive at its N ranks."""
        return self.spec.busbw(self.n)

    @contextlib.contextmanager
    def result_for(self, algorithm):
        """The output ``algorithm``'s row uses inside the block.

        The node-shared one for the shm row with ``--shared-result``, else the case's own.
        """
        if self.shared_recv is None or algorithm != "shm":
            yield
            return
        own, self.recv = self.recv, self.shared_recv
        try:
            yield
        finally:
            self.recv = own

    def call(self, algorithm, comm=None):
        """A zero-argument callable making one call of ``algorithm`` through the public face.

        The spec's function, with its arguments for this case.
        """
        fn = getattr(mpicoll, self.spec.function or self.spec.name)
        args = self.spec.args(self)
        comm = comm or self.comm
        return lambda: fn(*args, comm=comm, algorithm=algorithm)

    # -- reduction data ---------------------------------------------------
    def red_input(self, g):
        """This rank's input to a reduction, at global index ``g``."""
        r, m = self.rank, self.mod
        if self.opname == "prod":
            return np.where((g + r) % (self.n + 1) == 0, 2, 1).astype(self.dtype)
        return ((g + r) % m).astype(self.dtype)

    def red_expected(self, g, ranks=None):
        """The reduction at global index ``g`` over ranks 0 .. ranks-1 (all of them: None)."""
        n, m = (self.n if ranks is None else ranks), self.mod
        if self.opname == "prod":          # rank (-g) mod (N+1) holds the one 2, if it exists
            return np.where((-g) % (self.n + 1) < n, 2, 1).astype(self.dtype)
        s = g % m
        if self.opname == "min":
            low = np.zeros_like(s) if n >= m else np.where(s + n - 1 < m, s, 0)
            return low.astype(self.dtype)
        if self.opname == "max":
            if n >= m:
                return np.full_like(s, m - 1).astype(self.dtype)
            return np.where(s + n - 1 < m, s + n - 1, m - 1).astype(self.dtype)
        q, k = divmod(n, m)                # sum of (s + t) mod m for t < n
        full = q * (m * (m - 1) // 2)
        a = np.minimum(m - s, k)           # terms before the wrap
        b = k - a
        total = full + a * s + a * (a - 1) // 2 + b * (b - 1) // 2
        if self.dtype.kind in "iu":
            bits = 8 * self.dtype.itemsize  # wrap modulo 2^bits, as C arithmetic does
            total = total % (1 << bits) if bits < 64 else total
        return total.astype(self.dtype)

    # -- check ------------------------------------------------------------
    def _fill(self, arr, fn):
        for lo in range(0, arr.size, _CHUNK):
            idx = np.arange(lo, min(arr.size, lo + _CHUNK), dtype=np.int64)
            self.am.put(arr, lo, fn(idx))

    def _wrong(self, arr, fn):
        bad = 0
        for lo in range(0, arr.size, _CHUNK):
            hi = min(arr.size, lo + _CHUNK)
            got = self.am.to_host(arr[lo:hi])
            bad += int(np.count_nonzero(got != fn(np.arange(lo, hi, dtype=np.int64))))
        return bad

    def prepare_check(self):
        """Fill inputs with check data and outputs with the sentinel."""
        inp, out = self.spec.io(self)
        if out is not None and out is not inp:
            out[...] = _sentinel(self.dtype)
        if inp is not None:
            self._fill(inp, self.spec.input_fn(self))

    def wrong(self):
        """Elements of this rank's output (and input, which must stay intact) that differ."""
        inp, out = self.spec.io(self)
        bad = 0
        if out is not None:
            bad += self._wrong(out, self.spec.output_fn(self))
        if inp is not None and inp is not out:
            bad += self._wrong(inp, self.spec.input_fn(self))
        return bad


#: primitive name -> spec, in mpicoll.PRIMITIVES order, read from the registry at each use
#: (plug-ins included).
SPECS = LiveView(lambda: DEFINED, lambda p: getattr(DEFINED.get(p), "spec", None))


def Declared(attr):
    """A view: primitive -> what its spec declares as ``attr``, read at each use.

    Primitives whose spec leaves it None are not in it (a plug-in's that declares it is).
    """
    return LiveView(lambda: SPECS, lambda p: getattr(SPECS.get(p), attr, None))
