"""`horovod.torch` for Horovod's tests: every name is hcoll.torch's.

The only additions are answers to build/controller queries (which libraries Horovod was built
with, which controller runs), used solely where hcoll.torch itself has no such name; the names
that were needed are listed in STUBBED (empty with a complete hcoll.torch).
"""

import hcoll.torch as _impl

_FALSE = (lambda *args, **kwargs: False)
_BUILD_QUERIES = {
    "ccl_built": _FALSE, "ddl_built": _FALSE, "gloo_built": _FALSE, "gloo_enabled": _FALSE,
    "rocm_built": _FALSE, "cuda_built": lambda: bool(_impl.nccl_built()),
    "mpi_built": lambda: True, "mpi_enabled": lambda: True,
    "mpi_threads_supported": lambda: True,
}
STUBBED = sorted(n for n in _BUILD_QUERIES if not hasattr(_impl, n))


def __getattr__(name):
    try:
        return getattr(_impl, name)
    except AttributeError:
        if name in _BUILD_QUERIES:
            return _BUILD_QUERIES[name]
        raise


def __dir__():
    return sorted(set(dir(_impl)) | set(_BUILD_QUERIES))
