"""Finds and imports the compiled torch.distributed backend, hcoll.torch._c10d.

This is the one place that names the module and says where it is looked for, in order:
  1. next to this file (an installed package: the build copies _c10d<EXT_SUFFIX> into
     hcoll/torch/),
  2. $HCOLL_C10D_MODULE_DIR (the build tree's python/hcoll/torch; CTest sets it),
  3. the source tree's build*/python/hcoll/torch (as _lib.py looks for libhcoll).
The extension is built by CMake (HCOLL_WITH_TORCH, target hcoll_torch_c10d) against the torch
this Python imports.
"""

import importlib.machinery
import importlib.util
import os
import sys

MODULE_NAME = "_c10d"
QUALIFIED_NAME = "hcoll.torch." + MODULE_NAME
BUILD_SUBDIR = os.path.join("python", "hcoll", "torch")  # under a CMake build directory
ENV_DIR = "HCOLL_C10D_MODULE_DIR"


def file_names():
    """The file names this Python can import the module from (_c10d.cpython-311-x86_64-...so)."""
    return [MODULE_NAME + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES]


def candidate_dirs():
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [here]
    env = os.environ.get(ENV_DIR)
    if env:
        dirs.append(env)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    if os.path.isdir(repo):
        for entry in sorted(os.listdir(repo)):
            if entry.startswith("build"):
                dirs.append(os.path.join(repo, entry, BUILD_SUBDIR))
    return dirs


def load():
    if QUALIFIED_NAME in sys.modules:
        return sys.modules[QUALIFIED_NAME]
    for directory in candidate_dirs():
        for name in file_names():
            path = os.path.join(directory, name)
            if not os.path.exists(path):
                continue
            spec = importlib.util.spec_from_file_location(QUALIFIED_NAME, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[QUALIFIED_NAME] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[QUALIFIED_NAME]
                raise
            return module
    raise ImportError(
        "hcoll's torch.distributed backend (" + MODULE_NAME + "*.so) was not found in " +
        ", ".join(candidate_dirs()) + ": build it (CMake HCOLL_WITH_TORCH=ON, target "
        "hcoll_torch_c10d) and set " + ENV_DIR + " to the folder holding it")
