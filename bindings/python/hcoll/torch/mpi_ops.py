"""Horovod's tensor collectives on hcoll: `*_async` return a Handle for synchronize()/poll(),
the plain forms block and return tensors; a trailing underscore means in place.

Every function takes `process_set=` (a ProcessSet or an hcoll.Comm; None = the global set).
Allreduce and reducescatter default to Average, as in Horovod (the low-level binding's default
is SUM). Names match operations across ranks; None lets hcoll name them by call order.
"""

import ctypes
import operator

import torch

from .. import _lib
from . import _core
from ._core import describe, describe_all, describe_cached, lib, resolve, submit, synchronize

Average = _lib.AVERAGE
Sum = _lib.SUM
Min = _lib.MIN
Max = _lib.MAX
Product = _lib.PRODUCT
Adasum = _lib.ADASUM  # float tensors on the CPU only (docs/torch.md)

_byref = ctypes.byref


def _op(average, op, default=Average):
    if op is not None:
        if average is not None:
            raise ValueError("pass either `average` (deprecated in Horovod) or `op`, not both")
        return op
    if average is not None:
        return Average if average else Sum
    return default


def _averaged_in_torch(op, tensors):
    """Horovod averages in torch: a Sum in the runtime, then the output divided by the size in
    its own dtype (truncating for integers). Done the same way here, results are bit-identical
    to Horovod's (x / 3 and x * (1/3) differ in the last bit). bool keeps the runtime's Average,
    which refuses it."""
    return op == Average and all(t.dtype != torch.bool for t in tensors)


def _divide(tensors, size):
    for t in tensors:
        if t.is_floating_point():
            t.div_(size)
        else:
            t.div_(size, rounding_mode="trunc")
    return tensors


def _name(name):
    return None if name is None else name.encode()


def _contiguous(ts):
    return [t if t.is_contiguous() else t.contiguous() for t in ts]


def _first(req, outs):
    return outs[0]


def _device(ts):
    return ts[0].device if ts else torch.device("cpu")


def _copy_back(dsts, srcs):
    for d, s in zip(dsts, srcs):
        if d is not s:
            d.copy_(s)


# ------------------------------------------------------------------------------------------------
# allreduce
# ------------------------------------------------------------------------------------------------

def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """In place; synchronize() returns `tensor`. The fast path: a cached descriptor, one C
    call, nothing checked here that libhcoll checks."""
    if op is None or average is not None:
        op = _op(average, op)
    h = resolve(process_set)
    divide = None
    if _averaged_in_torch(op, (tensor,)):
        op, size = Sum, _core.comm_size(process_set)
        divide = size if size > 1 else None
    if tensor.is_contiguous():
        d = describe_cached(tensor)
        return submit(lib.hcoll_allreduce, h,
                      (None if name is None else name.encode(), d, d, op, prescale_factor,
                       postscale_factor), tensor,
                      None if divide is None else (lambda req: _divide((tensor,), divide)[0]),
                      tensor)
    work = tensor.contiguous()
    d = describe(work)

    def finish(req):
        if divide is not None:
            _divide((work,), divide)
        return tensor.copy_(work)
    return submit(lib.hcoll_allreduce, h,
                  (_name(name), _byref(d), _byref(d), op, prescale_factor, postscale_factor),
                  (work, d), finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Out of place; synchronize() returns a new tensor."""
    op = _op(average, op)
    h = resolve(process_set)
    src = tensor if tensor.is_contiguous() else tensor.contiguous()
    out = torch.empty_like(src)
    din, dout = describe(src), describe(out)
    finish = (lambda req: out)
    if _averaged_in_torch(op, (src,)):
        op, size = Sum, _core.comm_size(process_set)
        finish = (lambda req: _divide((out,), size)[0])
    return submit(lib.hcoll_allreduce, h,
                  (_name(name), _byref(din), _byref(dout), op, prescale_factor,
                   postscale_factor),
                  (src, out, din, dout), finish)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """A new tensor: the reduction over the process set (default op Average). Differentiable
    (gradient: the same allreduce of the output's gradient)."""
    op = _op(average, op)
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        out = allreduce(compressed, None, name, None, op, prescale_factor, postscale_factor,
                        process_set)
        return compression.decompress(out, ctx)
    if tensor.requires_grad and torch.is_grad_enabled():
        from .functions import AllreduceFn
        return AllreduceFn.apply(tensor, name, op, prescale_factor, postscale_factor,
                                 process_set)
    return synchronize(allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                       process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    """One grouped allreduce, in place; synchronize() returns the list."""
    op = _op(average, op)
    tensors = list(tensors)
    work = _contiguous(tensors)
    din = describe_all(work)
    size = None
    if _averaged_in_torch(op, work):
        op, size = Sum, _core.comm_size(process_set)

    def finish(req):
        if size is not None:
            _divide(work, size)
        _copy_back(tensors, work)
        return tensors
    return submit(lib.hcoll_grouped_allreduce, resolve(process_set),
                  (_name(name), len(work), din, din, op, prescale_factor, postscale_factor),
                  (work, din), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    op = _op(average, op)
    srcs = _contiguous(list(tensors))
    outs = [torch.empty_like(t) for t in srcs]
    din, dout = describe_all(srcs), describe_all(outs)
    finish = (lambda req: outs)
    if _averaged_in_torch(op, srcs):
        op, size = Sum, _core.comm_size(process_set)
        finish = (lambda req: _divide(outs, size))
    return submit(lib.hcoll_grouped_allreduce, resolve(process_set),
                  (_name(name), len(srcs), din, dout, op, prescale_factor, postscale_factor),
                  (srcs, outs, din, dout), finish)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """New tensors; differentiable like allreduce."""
    op = _op(average, op)
    tensors = list(tensors)
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        outs = grouped_allreduce([p[0] for p in pairs], None, name, None, op, prescale_factor,
                                 postscale_factor, process_set)
        return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        from .functions import GroupedAllreduceFn
        return list(GroupedAllreduceFn.apply(name, op, prescale_factor, postscale_factor,
                                             process_set, *tensors))
    return synchronize(grouped_allreduce_async(tensors, None, name, op, prescale_factor,
                                               postscale_factor, process_set))


# ------------------------------------------------------------------------------------------------
# allgather, broadcast, alltoall, reducescatter
# ------------------------------------------------------------------------------------------------

def allgather_async(tensor, name=None, process_set=None):
    return _core.submit_with_outputs("allgather", resolve(process_set), _name(name),
                                     [tensor.contiguous()], (), tensor.device, _first,
                                     gathered=True)


def allgather(tensor, name=None, process_set=None):
    """Concatenation along dim 0 in rank order (dim 0 may differ per rank). Differentiable."""
    if tensor.requires_grad and torch.is_grad_enabled():
        from .functions import AllgatherFn
        return AllgatherFn.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=None):
    srcs = _contiguous(list(tensors))
    return _core.submit_with_outputs("grouped_allgather", resolve(process_set), _name(name),
                                     srcs, (), _device(srcs), gathered=True)


def grouped_allgather(tensors, name=None, process_set=None):
    tensors = list(tensors)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        from .functions import GroupedAllgatherFn
        return list(GroupedAllgatherFn.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    d = describe(work)

    def finish(req):
        return tensor if work is tensor else tensor.copy_(work)
    return submit(lib.hcoll_broadcast, resolve(process_set),
                  (_name(name), _byref(d), _core.root_in(process_set, root_rank)), (work, d),
                  finish)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return broadcast_async_(tensor.clone(memory_format=torch.contiguous_format), root_rank, name,
                            process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def broadcast(tensor, root_rank, name=None, process_set=None):
    """A new tensor holding root's value (root_rank: a global rank). Differentiable (gradient:
    the average over ranks of the output's gradient on root, zero elsewhere)."""
    if tensor.requires_grad and torch.is_grad_enabled():
        from .functions import BroadcastFn
        return BroadcastFn.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def grouped_broadcast_async_(tensors, root_rank, name=None, process_set=None):
    tensors = list(tensors)
    work = _contiguous(tensors)
    d = describe_all(work)

    def finish(req):
        _copy_back(tensors, work)
        return tensors
    return submit(lib.hcoll_grouped_broadcast, resolve(process_set),
                  (_name(name), len(work), d, _core.root_in(process_set, root_rank)),
                  (work, d), finish)


def grouped_broadcast_(tensors, root_rank, name=None, process_set=None):
    return synchronize(grouped_broadcast_async_(tensors, root_rank, name, process_set))


def _integer_splits(splits):
    """splits as a list of ints; anything but integers (a float tensor, 2.5) is refused, never
    cast."""
    if torch.is_tensor(splits):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError(f"alltoall: splits must hold integers, got a {splits.dtype} tensor")
        return [int(s) for s in splits.reshape(-1).tolist()]
    out = []
    for s in splits:
        try:
            out.append(operator.index(s))  # ints and numpy integers; floats raise TypeError
        except TypeError:
            raise ValueError(f"alltoall: splits must hold integers, got {s!r}") from None
    return out


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """synchronize() returns (output, received_splits as an int32 tensor)."""
    sp = None
    if splits is not None:
        splits = _integer_splits(splits)
        sp = (ctypes.c_int64 * max(len(splits), 1))(*splits)

    def post(req, outs):
        return outs[0], torch.tensor(_core.received_splits(req), dtype=torch.int32)
    return _core.submit_with_outputs("alltoall", resolve(process_set), _name(name),
                                     [tensor.contiguous()], (sp,), tensor.device, post)


def alltoall(tensor, splits=None, name=None, process_set=None):
    """splits[i] rows go to rank i (None = even). Returns the rows received (rank order); with
    `splits` given, (output, received_splits) as in Horovod. Differentiable."""
    if tensor.requires_grad and torch.is_grad_enabled():
        from .functions import AlltoallFn
        out, rsplits = AlltoallFn.apply(tensor, splits, name, process_set)
    else:
        out, rsplits = synchronize(alltoall_async(tensor, splits, name, process_set))
    return out if splits is None else (out, rsplits)


def _scattered_shapes(srcs, process_set):
    """This rank's reducescatter output shapes: c_r = d0 // N + (r < d0 % N) rows."""
    n, r = _core.comm_size(process_set), _core.comm_rank(process_set)
    if any(t.dim() == 0 for t in srcs):
        return None  # the library refuses 0-d inputs with its own message
    return [(t.shape[0] // n + (r < t.shape[0] % n),) + tuple(t.shape[1:]) for t in srcs]


def reducescatter_async(tensor, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=None):
    srcs = [tensor.contiguous()]
    return _core.submit_with_outputs("reducescatter", resolve(process_set), _name(name), srcs,
                                     (op, prescale_factor, postscale_factor), tensor.device,
                                     _first, _scattered_shapes(srcs, process_set))


def reducescatter(tensor, name=None, compression=None, op=Average, prescale_factor=1.0,
                  postscale_factor=1.0, process_set=None):
    """Rank r gets its block of rows of the reduction (default Average). Differentiable."""
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        out = reducescatter(compressed, name, None, op, prescale_factor, postscale_factor,
                            process_set)
        return compression.decompress(out, ctx)
    if tensor.requires_grad and torch.is_grad_enabled():
        from .functions import ReducescatterFn
        return ReducescatterFn.apply(tensor, name, op, prescale_factor, postscale_factor,
                                     process_set)
    return synchronize(reducescatter_async(tensor, name, op, prescale_factor, postscale_factor,
                                           process_set))


def grouped_reducescatter_async(tensors, name=None, op=Average, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=None):
    srcs = _contiguous(list(tensors))
    return _core.submit_with_outputs("grouped_reducescatter", resolve(process_set), _name(name),
                                     srcs, (op, prescale_factor, postscale_factor), _device(srcs),
                                     None, _scattered_shapes(srcs, process_set))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, prescale_factor=1.0,
                          postscale_factor=1.0, process_set=None):
    tensors = list(tensors)
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        outs = grouped_reducescatter([p[0] for p in pairs], name, None, op, prescale_factor,
                                     postscale_factor, process_set)
        return [compression.decompress(o, p[1]) for o, p in zip(outs, pairs)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        from .functions import GroupedReducescatterFn
        return list(GroupedReducescatterFn.apply(name, op, prescale_factor, postscale_factor,
                                                 process_set, *tensors))
    return synchronize(grouped_reducescatter_async(tensors, name, op, prescale_factor,
                                                   postscale_factor, process_set))


# ------------------------------------------------------------------------------------------------
# sparse allreduce
# ------------------------------------------------------------------------------------------------

def sparse_allreduce_async(tensor, name=None, op=Average, process_set=None):
    """Allreduce of a sparse COO tensor as Horovod does it: allgathers of its indices and values
    (duplicate indices then sum when the result is used). Returns a callable that waits and
    returns the sparse result (values / size for Average)."""
    if op not in (Sum, Average):
        raise ValueError("sparse_allreduce_async supports Sum and Average only")
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    # allgather concatenates along dim 0: indices travel as (nnz, sparse_dim) rows
    indices = t.indices().t().contiguous()
    values = t.values().contiguous()
    base = None if name is None else str(name)
    h = grouped_allgather_async([indices, values],
                                None if base is None else f"{base}.sparse", process_set)
    size = _core.comm_size(process_set)

    def handle():
        gathered_indices, gathered_values = synchronize(h)
        if op == Average:
            gathered_values = gathered_values / size
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, t.size(),
                                       dtype=t.dtype, device=t.device)
    return handle


# ------------------------------------------------------------------------------------------------
# join, barrier
# ------------------------------------------------------------------------------------------------

def join(device=-1, process_set=None):
    """Blocks until every rank joined; returns the rank that joined last. Meanwhile this rank
    contributes zeros to the others' allreduces (Average still divides by the full size)."""
    h = submit(lib.hcoll_join, resolve(process_set), (), None,
               lambda req: int(_core._take_output(req, 0, torch.device("cpu"))))
    return synchronize(h)


def barrier(process_set=None):
    synchronize(submit(lib.hcoll_barrier, resolve(process_set), (), None, None))
