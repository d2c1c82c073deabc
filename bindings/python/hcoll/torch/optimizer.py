"""DistributedOptimizer and the broadcast helpers (parameters, optimizer state, objects).

Gradients are averaged while backward still runs: a hook on each parameter's gradient
accumulator counts the parameter ready; in bucketed mode (bucket_bytes > 0) the parameters are cut
into fixed buckets at construction (reverse registration order, which is roughly the order
backward produces gradients), and a bucket whose every parameter is ready is submitted at once as
ONE grouped allreduce named by its parameters. Since the name, not the submission order, matches
operations across ranks, hooks may fire in any order on any rank. step() waits for what is in
flight, submitting what never became ready (unused parameters contribute zeros).
"""

import contextlib
import ctypes
import pickle
import warnings

import torch

from . import _core
from . import mpi_ops as ops
from .compression import Compression

DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024  # as torch DDP's bucket_cap_mb


class _Param:
    """One parameter's state, captured by its hook (no dict lookups keyed by tensors, whose
    __hash__ is Python code, on the per-gradient path)."""

    __slots__ = ("p", "name", "delay", "bucket", "handle", "work", "ctx", "ptr", "desc", "view",
                 "vptr", "sparse", "shandle")

    def __init__(self, p, name, delay):
        self.p = p
        self.name = name.encode()
        self.delay = delay
        self.bucket = None
        self.handle = None  # per-parameter mode: the allreduce in flight
        self.work = None    # its compressed tensor, if any
        self.ctx = None
        self.ptr = None     # cached descriptor: valid while p.grad's address is `ptr`
        self.desc = None
        self.view = None    # flat buckets: p.grad is this view of the bucket's buffer
        self.vptr = None
        self.sparse = False   # its gradients are sparse (seen by the probe hook): own path
        self.shandle = None   # the sparse path's operation in flight: (kind, handle)


class _Bucket:
    """Parameters submitted together as ONE grouped allreduce.

    Flat buckets (the default for contiguous dense parameters): every gradient is a view of one
    buffer per dtype (`flat`), as torch DDP's gradient_as_bucket_view, so the group has one member
    per dtype (usually one), no packing, and its descriptors never change. Otherwise the group has
    one member per gradient, and the descriptor array is rebuilt only when a gradient tensor was
    replaced."""

    __slots__ = ("params", "size", "name", "ready", "handle", "ptrs", "descs", "work", "ctxs",
                 "flat")

    def __init__(self, params, names):
        self.params = params  # _Param objects
        self.size = len(params)
        first, last = names[0], names[-1]
        self.name = (f"grads[{first}]" if len(params) == 1
                     else f"grads[{first}..{last}]#{len(params)}").encode()
        self.ready = 0
        self.handle = None
        self.ptrs = None
        self.descs = None
        self.work = None
        self.ctxs = None
        self.flat = None


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 process_set, bucket_bytes, gradient_predivide_factor, sparse_as_dense=False):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._compressed = compression is not Compression.none
        self._passes = int(backward_passes_per_step)
        if self._passes < 1:
            raise ValueError("backward_passes_per_step must be >= 1")
        self._op = op
        self._pre, self._post = 1.0, 1.0
        if gradient_predivide_factor != 1.0:
            if op != ops.Average:
                raise ValueError("gradient_predivide_factor needs op=Average")
            self._pre, self._post = 1.0 / gradient_predivide_factor, gradient_predivide_factor
        self._sparse_as_dense = bool(sparse_as_dense)
        # On a rank outside the process set this is the plain optimizer: nothing communicates
        # (Horovod's behaviour); members average among themselves.
        self._member = not (isinstance(process_set, _core.ProcessSet)
                            and not process_set.included())
        self._comm = _core.resolve(process_set) if self._member else None
        self._process_set = process_set

        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(n, tuple) or len(n) != 2 for n in named):
                raise ValueError("named_parameters must be (name, parameter) tuples, as from "
                                 "model.named_parameters()")
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise ValueError("named_parameters has duplicate names")
            by_param = {p: n for n, p in named}
            unnamed = [p for p in all_params if p not in by_param]
            if unnamed:
                raise ValueError(f"{len(unnamed)} optimizer parameters are not in "
                                 "named_parameters")
        else:
            by_param = {p: f"allreduce.noname.{i}.{j}"
                        for i, g in enumerate(self.param_groups)
                        for j, p in enumerate(g["params"])}
        self._parameter_names = {p: by_param[p] for p in all_params}  # as Horovod's attribute
        self._states = [_Param(p, by_param[p], self._passes)
                        for p in all_params if p.requires_grad] if self._member else []
        self._buckets = []
        if bucket_bytes and bucket_bytes > 0:
            self._make_buckets(int(bucket_bytes))
        self._flat_ids = {id(st.p) for b in self._buckets if b.flat is not None
                          for st in b.params}
        self._singles = [st for st in self._states if st.bucket is None]  # per-parameter mode
        self._synchronized = False
        self._should_synchronize = True
        self._grad_accs = []
        self._register_hooks()

    # -- setup -----------------------------------------------------------------------------------

    def _make_buckets(self, cap):
        current, size = [], 0
        for st in reversed(self._states):
            nbytes = st.p.numel() * st.p.element_size()
            if current and size + nbytes > cap:
                self._add_bucket(current)
                current, size = [], 0
            current.append(st)
            size += nbytes
        if current:
            self._add_bucket(current)

    def _add_bucket(self, states):
        b = _Bucket(states, [st.name.decode() for st in states])
        self._buckets.append(b)
        for st in states:
            st.bucket = b
        if all(st.p.is_contiguous() and not st.p.is_sparse for st in states):
            self._flatten(b)

    @staticmethod
    def _flatten(b):
        """Makes every gradient of `b` a view of one zeroed buffer per (dtype, device)."""
        kinds = {}
        for st in b.params:
            kinds.setdefault((st.p.dtype, st.p.device), []).append(st)
        b.flat = []
        for (dtype, device), sts in kinds.items():
            flat = torch.zeros(sum(st.p.numel() for st in sts), dtype=dtype, device=device)
            at = 0
            for st in sts:
                n = st.p.numel()
                st.view = flat[at:at + n].view_as(st.p)
                at += n
                with torch.no_grad():
                    if st.p.grad is not None:
                        st.view.copy_(st.p.grad)
                st.p.grad = st.view
                st.vptr = st.view.data_ptr()
            b.flat.append(flat)
        if not b.flat[0].is_cuda:
            b.descs = _core.describe_all(b.flat)

    def _register_hooks(self):
        for st in self._states:
            # The AccumulateGrad node runs after p.grad holds the accumulated gradient.
            acc = st.p.expand_as(st.p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(st))
            self._grad_accs.append(acc)
            st.p.register_hook(self._make_sparse_probe(st))

    @staticmethod
    def _make_sparse_probe(st):
        # Runs on the incoming gradient before it is accumulated. A sparse gradient (e.g.
        # nn.Embedding(sparse=True)) takes its own path, Horovod's: it must not be accumulated
        # into a dense bucket view, so the parameter's gradient starts from None.
        def probe(grad):
            if grad.is_sparse:
                st.sparse = True
                if st.view is not None and st.p.grad is st.view:
                    st.p.grad = None
            return grad
        return probe

    def _make_hook(self, st):
        # The per-gradient path (one call per parameter per backward pass): a countdown and a
        # counter. A flat bucket's gradients that were replaced (set to None, out-of-place
        # accumulation) are put back into the bucket when it is submitted.
        def hook(*_):
            st.delay -= 1
            if st.delay == 0:
                if st.sparse:
                    self._submit_sparse(st)
                b = st.bucket
                if st.sparse and b is None:
                    pass
                elif b is None:
                    self._submit_one(st)
                else:
                    b.ready += 1
                    if b.ready == b.size:
                        self._submit_bucket(b)
            elif st.delay < 0:
                st.delay = 0
                raise AssertionError(
                    "gradients were computed more than backward_passes_per_step times before "
                    "step(); increase backward_passes_per_step to accumulate them locally")
        return hook

    # -- submission (the fast path: cached descriptors, one C call) -----------------------------

    @staticmethod
    def _attach(st):
        g = st.p.grad
        with torch.no_grad():
            if g is None:
                st.view.zero_()
            else:
                st.view.copy_(g)
        st.p.grad = st.view

    @staticmethod
    def _grad(st):
        p = st.p
        if p.grad is None:  # unused on this rank: it still has to contribute to the group
            p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
        return p.grad

    def _submit_sparse(self, st):
        """Horovod's sparse path: allgathers of indices and values, or with sparse_as_dense a
        dense allreduce of the densified gradient."""
        g = st.p.grad
        if g is None or not g.is_sparse:  # densified meanwhile: the dense path has it
            st.sparse = False
            return
        if self._sparse_as_dense:
            dense = g.to_dense().contiguous()
            st.shandle = ("dense", ops.allreduce_async_(dense, None, st.name.decode(), self._op,
                                                        self._pre, self._post,
                                                        self._process_set), dense)
        else:
            st.shandle = ("sparse", ops.sparse_allreduce_async(
                g, st.name.decode(), self._op, self._process_set), None)

    def _finish_sparse(self, st):
        kind, h, _ = st.shandle
        st.shandle = None
        if kind == "dense":
            st.p.grad = _core.synchronize(h).to_sparse()
        else:
            st.p.grad = h().coalesce()

    def _submit_one(self, st):
        g = self._grad(st)
        if self._compressed:
            work, st.ctx = self._compression.compress(g)
            st.work = work = work.contiguous()
            d = ctypes.pointer(_core.describe(work))
            keep = (work, d)
        else:
            # CUDA descriptors carry the current stream, so they are never reused.
            if st.ptr != g.data_ptr() or g.is_cuda:
                if not g.is_contiguous():
                    st.p.grad = g = g.contiguous()
                st.ptr = g.data_ptr()
                st.desc = ctypes.pointer(_core.describe(g))
            d = st.desc
            keep = (g, d)
        st.handle = _core.submit(_core.lib.hcoll_allreduce, self._comm,
                                 (st.name, d, d, self._op, self._pre, self._post), keep, None)

    def _submit_bucket(self, b):
        if b.flat is not None:
            for st in b.params:
                # replaced since zero_grad(): home again (sparse gradients stay out: their
                # zero view goes along, the same on every rank)
                if st.p.grad is not st.view and not st.sparse:
                    self._attach(st)
            if self._compressed:
                pairs = [self._compression.compress(f) for f in b.flat]
                b.work = [w.contiguous() for w, _ in pairs]
                b.ctxs = [c for _, c in pairs]
                descs, keep = _core.describe_all(b.work), b.work
            else:
                descs = b.descs if not b.flat[0].is_cuda else _core.describe_all(b.flat)
                keep = b.flat
            b.handle = _core.submit(_core.lib.hcoll_grouped_allreduce, self._comm,
                                    (b.name, len(b.flat), descs, descs, self._op, self._pre,
                                     self._post), (keep, descs), None)
            return
        members = [st for st in b.params if not st.sparse]
        if not members:
            return
        grads = [self._grad(st) for st in members]
        if self._compressed:
            pairs = [self._compression.compress(g) for g in grads]
            b.work = [w.contiguous() for w, _ in pairs]
            b.ctxs = [c for _, c in pairs]
            b.descs = _core.describe_all(b.work)
            keep = b.work
        else:
            if [g.data_ptr() for g in grads] != b.ptrs or grads[0].is_cuda:
                for st, g in zip(members, grads):
                    if not g.is_contiguous():
                        st.p.grad = g.contiguous()
                grads = [st.p.grad for st in members]
                b.ptrs = [g.data_ptr() for g in grads]
                b.descs = _core.describe_all(grads)
            keep = grads
        b.handle = _core.submit(_core.lib.hcoll_grouped_allreduce, self._comm,
                                (b.name, len(members), b.descs, b.descs, self._op, self._pre,
                                 self._post), (keep, b.descs), None)

    def _unflat_params(self):
        """The parameters zero_grad() treats as torch does: every one not in a flat bucket
        (computed per call: param_groups may change)."""
        flat = self._flat_ids
        return [p for g in self.param_groups for p in g["params"] if id(p) not in flat]

    # -- Horovod's optimizer interface -----------------------------------------------------------

    def _in_flight(self):
        return (any(st.handle is not None or st.shandle is not None for st in self._states)
                or any(b.handle is not None for b in self._buckets))

    def synchronize(self):
        """Submits what is not in flight yet, waits for everything and puts the averaged
        gradients into p.grad."""
        for st in self._states:
            if st.sparse and st.shandle is None and st.delay != self._passes:
                self._submit_sparse(st)
        for st in self._singles:
            if st.handle is None and not st.sparse:
                self._submit_one(st)
        for b in self._buckets:
            if b.handle is None:
                self._submit_bucket(b)
        decompress = self._compression.decompress
        try:
            for st in self._states:
                if st.shandle is not None:
                    self._finish_sparse(st)
            for st in self._singles:
                if st.handle is not None:
                    h, st.handle = st.handle, None
                    _core.synchronize(h)
                    if st.work is not None:
                        st.p.grad.copy_(decompress(st.work, st.ctx))
                        st.work = st.ctx = None
            for b in self._buckets:
                h, b.handle = b.handle, None
                _core.synchronize(h)
                if b.ctxs is not None:
                    dsts = b.flat if b.flat is not None else [st.p.grad for st in b.params]
                    for dst, w, c in zip(dsts, b.work, b.ctxs):
                        dst.copy_(decompress(w, c))
                    b.work = b.ctxs = None
        finally:
            # On failure the handles not waited for are dropped: each is freed once its
            # operation ended, its tensors referenced until then.
            for st in self._singles:
                st.handle = None
                st.work = st.ctx = None
            for st in self._states:
                st.shandle = None
            passes = self._passes
            for st in self._states:
                st.delay = passes
            for b in self._buckets:
                b.handle = None
                b.ready = 0
                b.work = b.ctxs = None
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "after optimizer.synchronize(): the gradients are averaged again")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        """As the optimizer's, except that gradients living in a flat bucket are zeroed in place
        (one fill per bucket buffer) and stay views of it even with set_to_none=True (like DDP's
        gradient_as_bucket_view)."""
        if self._in_flight():
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize()")
        for b in self._buckets:
            if b.flat is not None:
                for f in b.flat:
                    f.zero_()
                for st in b.params:
                    if st.sparse:
                        st.p.grad = None  # accumulated afresh as a sparse gradient
                    elif st.p.grad is not st.view:
                        st.p.grad = st.view
        for p in self._unflat_params():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
                continue
            if g.grad_fn is not None:
                g.detach_()
            else:
                g.requires_grad_(False)
            g.zero_()


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=ops.Average, comm=None,
                         bucket_bytes=DEFAULT_BUCKET_BYTES, gradient_predivide_factor=1.0,
                         process_set=None, sparse_as_dense=False, num_groups=0, groups=None):
    """Wraps `optimizer` so that step() applies gradients averaged (op) over the process set.

    bucket_bytes: gradients are submitted in grouped allreduces of about this many bytes (one
    per bucket, as soon as the bucket is complete); 0 = one allreduce per parameter, submitted
    from its hook. Gradients accumulate locally over backward_passes_per_step backward passes
    (summed, as in Horovod) before they are averaged. The returned object is an instance of a
    subclass of optimizer's class, built on its param_groups.

    Sparse gradients (nn.Embedding(sparse=True)) are averaged as Horovod does: allgathers of
    their indices and values, or with sparse_as_dense=True a dense allreduce. num_groups and
    groups (Horovod's grouping of allreduces) are accepted; bucket_bytes decides the grouping.
    On a rank outside `process_set` the optimizer does not communicate."""
    adasum_comm = process_set if process_set is not None else comm
    member = not (isinstance(adasum_comm, _core.ProcessSet) and not adasum_comm.included())
    # Horovod's delta optimizer; a non-member gets the plain one below, which does not communicate.
    if op == ops.Adasum and member and _core.comm_size(adasum_comm) > 1:
        if gradient_predivide_factor != 1.0:
            raise ValueError("gradient_predivide_factor needs op=Average")
        from .adasum_optimizer import adasum_optimizer
        return adasum_optimizer(optimizer, named_parameters, compression,
                                backward_passes_per_step, adasum_comm)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, process_set if process_set is not None else comm, bucket_bytes,
               gradient_predivide_factor, sparse_as_dense)


# ------------------------------------------------------------------------------------------------
# Broadcast helpers
# ------------------------------------------------------------------------------------------------

def broadcast_parameters(params, root_rank, process_set=None):
    """Replaces every tensor of `params` (a state_dict, model.named_parameters(), or a list of
    (name, tensor)) with root_rank's, in ONE grouped broadcast (sorted by name for dicts)."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if any(not isinstance(i, tuple) or len(i) != 2 for i in items):
            raise ValueError("params must be a dict or a list of (name, tensor) tuples")
    tensors = [t for _, t in items if t is not None]
    if not tensors:
        return
    with torch.no_grad():
        ops.grouped_broadcast_(tensors, root_rank, "broadcast_parameters", process_set)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's `obj` (pickled) on every rank; the root gets its own object back."""
    name = name or "broadcast_object"
    root = _core.is_root(process_set, root_rank)  # a global rank, as in Horovod
    if root:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        size = torch.tensor([len(payload)], dtype=torch.int64)
    else:
        size = torch.zeros(1, dtype=torch.int64)
    ops.broadcast_(size, root_rank, name + ".size", process_set)
    if root:
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    else:
        data = torch.empty(int(size[0]), dtype=torch.uint8)
    ops.broadcast_(data, root_rank, name + ".data", process_set)
    return obj if root else pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Every rank's `obj` (pickled), in rank order."""
    name = name or "allgather_object"
    data = torch.frombuffer(bytearray(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)),
                            dtype=torch.uint8)
    sizes = ops.allgather(torch.tensor([data.numel()], dtype=torch.int64), name + ".size",
                          process_set)
    gathered = ops.allgather(data, name + ".data", process_set)
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(gathered[at:at + n].numpy().tobytes()))
        at += n
    return out


def broadcast_optimizer_state(optimizer, root_rank, process_set=None):
    """Loads root_rank's optimizer state (per-parameter state and hyperparameters such as the
    learning rate) into `optimizer` on every rank."""
    state = broadcast_object(optimizer.state_dict(), root_rank, "broadcast_optimizer_state",
                             process_set)
    if not _core.is_root(process_set, root_rank):
        optimizer.load_state_dict(state)
