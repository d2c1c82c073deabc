"""Differentiable collectives (torch.autograd.Function) with Horovod's gradients, which its own
tests pin (see docs/torch.md, "Gradients"):

    allreduce      -> allreduce of the output gradient (same op and scale factors)
    allgather      -> Average allreduce of the output gradient, then this rank's rows
    broadcast      -> Average allreduce of the output gradient on the root, zero elsewhere
    alltoall       -> alltoall of the output gradient back to the senders
    reducescatter  -> allgather of the output gradient (x size for Sum, x pre x post)

Averaging (not summing) the gradients of allgather and broadcast makes each rank's gradient
the gradient of the mean of the ranks' losses, the quantity DistributedOptimizer averages.
"""

import torch

from . import _core
from . import mpi_ops as ops
from ._core import synchronize


def _grad_name(name):
    return None if name is None else name + ".grad"


def _offsets(dims, process_set):
    """Rows of every rank: allgather of this rank's dim-0 sizes (one int64 row per rank)."""
    t = torch.tensor([dims], dtype=torch.int64)
    return synchronize(ops.allgather_async(t, None, process_set))


class AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, pre, post, process_set):
        ctx.args = (name, op, pre, post, process_set)
        return synchronize(ops.allreduce_async(tensor, None, name, op, pre, post, process_set))

    @staticmethod
    def backward(ctx, grad):
        name, op, pre, post, ps = ctx.args
        g = synchronize(ops.allreduce_async(grad, None, _grad_name(name), op, pre, post, ps))
        return g, None, None, None, None, None


class GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, pre, post, process_set, *tensors):
        ctx.args = (name, op, pre, post, process_set)
        return tuple(synchronize(ops.grouped_allreduce_async(tensors, None, name, op, pre, post,
                                                             process_set)))

    @staticmethod
    def backward(ctx, *grads):
        name, op, pre, post, ps = ctx.args
        gs = synchronize(ops.grouped_allreduce_async(grads, None, _grad_name(name), op, pre, post,
                                                     ps))
        return (None, None, None, None, None) + tuple(gs)


class AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.args = (tensor.shape[0], name, process_set)
        return synchronize(ops.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        dim, name, ps = ctx.args
        summed = synchronize(ops.allreduce_async(grad.contiguous(), None, _grad_name(name),
                                                 ops.Average, 1.0, 1.0, ps))
        rows = _offsets([dim], ps)[:, 0]
        offset = int(rows[:_core.comm_rank(ps)].sum())
        return summed.narrow(0, offset, dim), None, None


class GroupedAllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.args = ([t.shape[0] for t in tensors], name, process_set)
        return tuple(synchronize(ops.grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        dims, name, ps = ctx.args
        summed = synchronize(ops.grouped_allreduce_async(grads, None, _grad_name(name),
                                                         ops.Average, 1.0, 1.0, ps))
        rows = _offsets(dims, ps)
        before = rows[:_core.comm_rank(ps)].sum(0)
        return (None, None) + tuple(g.narrow(0, int(before[i]), dims[i])
                                    for i, g in enumerate(summed))


class BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.args = (root_rank, name, process_set)
        return synchronize(ops.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        root, name, ps = ctx.args
        g = synchronize(ops.allreduce_async(grad.contiguous(), None, _grad_name(name),
                                            ops.Average, 1.0, 1.0, ps))
        if not _core.is_root(ps, root):  # root_rank is a global rank, as in Horovod
            g.zero_()
        return g, None, None, None


class AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(ops.alltoall_async(tensor, splits, name, process_set))
        ctx.args = (received, tensor.shape[0], name, process_set)
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _unused):
        received, rows, name, ps = ctx.args
        back, _ = synchronize(ops.alltoall_async(grad, received, _grad_name(name), ps))
        if back.shape[0] < rows:  # rows past sum(splits) were not sent: their gradient is zero
            pad = back.new_zeros((rows - back.shape[0],) + tuple(back.shape[1:]))
            back = torch.cat([back, pad])
        return back, None, None, None


def _scattered_grads(grads, op, scale, ps):
    """Horovod's reducescatter gradient before the allgather: x size for Sum, x pre x post."""
    if op == ops.Sum:
        scale *= _core.comm_size(ps)
    return [(g * scale if scale != 1.0 else g).contiguous() for g in grads]


class ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, pre, post, process_set):
        if op not in (ops.Sum, ops.Average):
            raise ValueError("reducescatter is differentiable for Sum and Average only")
        ctx.args = (name, op, pre * post, process_set)
        return synchronize(ops.reducescatter_async(tensor, name, op, pre, post, process_set))

    @staticmethod
    def backward(ctx, grad):
        name, op, scale, ps = ctx.args
        g, = _scattered_grads([grad], op, scale, ps)
        return synchronize(ops.allgather_async(g, _grad_name(name), ps)), None, None, None, None, \
            None


class GroupedReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, pre, post, process_set, *tensors):
        if op not in (ops.Sum, ops.Average):
            raise ValueError("grouped_reducescatter is differentiable for Sum and Average only")
        ctx.args = (name, op, pre * post, process_set)
        return tuple(synchronize(ops.grouped_reducescatter_async(tensors, name, op, pre, post,
                                                                 process_set)))

    @staticmethod
    def backward(ctx, *grads):
        name, op, scale, ps = ctx.args
        gs = synchronize(ops.grouped_allgather_async(_scattered_grads(grads, op, scale, ps),
                                                     _grad_name(name), ps))
        return (None, None, None, None, None) + tuple(gs)
