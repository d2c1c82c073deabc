"""DistributedOptimizer(op=Adasum): Horovod's delta optimizer for Adasum.

Adasum combines what each rank would do alone, so it reduces the parameter UPDATE, not the
gradient: each rank applies its own optimizer step to a parameter as soon as backward produced
that parameter's gradient (the wrapped optimizer, run on that one parameter), the change it made
(delta = new - old) is Adasum-allreduced in place, and step() sets the parameter to old + the
combined delta. As Horovod's _DistributedAdasumOptimizer: gradients accumulate locally over
backward_passes_per_step passes before the local step, synchronize() does nothing, and
skip_synchronize() is refused. Horovod uses it only on more than one rank (one rank: the plain
DistributedOptimizer with op=Adasum, whose allreduce of one rank is the identity); so does
hcoll's DistributedOptimizer. Unlike Horovod, any process set (communicator) works: hcoll runs
Adasum on every communicator. CPU tensors of a floating dtype only (hcoll.ADASUM's rule).
"""

import contextlib

import torch

from . import mpi_ops as ops


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, comm):
        super(self.__class__, self).__init__(params)
        if backward_passes_per_step <= 0:
            raise ValueError("backward_passes_per_step must be > 0")
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:  # unique across parameter groups (Horovod's names repeat per group)
            named_parameters = [(f"allreduce.noname.{i}", p) for i, p in enumerate(all_params)]
        if any(not isinstance(item, tuple) for item in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [n for n, _ in named_parameters]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: " + ", ".join(dups))
        unnamed = {id(p) for p in all_params} - {id(p) for _, p in named_parameters}
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: "
                             + ", ".join(str(i) for i in unnamed))
        self._compression = compression
        self._comm = comm
        self._parameter_names = {p: n for n, p in sorted(named_parameters, key=lambda x: x[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for _, p in named_parameters}
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        for p in all_params:
            if p.requires_grad:
                p.grad = p.data.new(p.size()).zero_()
                self._requires_update.add(p)
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_hook(p))
                self._grad_accs.append(acc)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _local_step_and_reduce(self, p):
        """Steps the wrapped optimizer on `p` alone, leaves p = delta, and submits its Adasum."""
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is v for v in group["params"]) else []
        try:
            start.data.copy_(p.data)
            super(self.__class__, self).step()
            p.data.sub_(start)
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        compressed, ctx = self._compression.compress(p.data)
        handle = ops.allreduce_async_(compressed, name=self._parameter_names.get(p),
                                      op=ops.Adasum, process_set=self._comm)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*_):
            if p in self._handles and self._handles[p][0] is not None and \
                    self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._local_step_and_reduce(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        pass  # the deltas are waited for in step()

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):  # no gradient this time
            self._handles[p] = self._local_step_and_reduce(p)
        for p, (handle, ctx) in self._handles.items():
            if handle is None:  # step() before backward_passes_per_step passes
                handle, ctx = self._local_step_and_reduce(p)
            delta = self._compression.decompress(ops.synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def adasum_optimizer(optimizer, named_parameters, compression, backward_passes_per_step, comm):
    """An instance of a subclass of optimizer's class (as DistributedOptimizer returns)."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               comm)
