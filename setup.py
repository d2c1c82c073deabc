"""Builds the `hcoll` Python package with libhcoll.so.0 inside it, through CMake.

    python3 -m venv --system-site-packages venv
    venv/bin/pip install --no-build-isolation .          # or: pip wheel --no-build-isolation .

Build backend: setuptools + wheel from Debian (python3-setuptools 66, python3-wheel), declared in
pyproject.toml. Only Debian's packages are reachable from our machines (no PyPI), so backends that
pip would have to fetch (scikit-build-core, meson-python) are out, and --no-build-isolation makes
pip use the installed setuptools instead of downloading one into an isolated environment.
setuptools only wraps: CMake builds everything, and setup.py runs it from build_py.

Convention (keep the two sides independent): the package's contents are exactly CMake's install
component `python`, laid out relative to site-packages. Every part of the package is an
    install(... DESTINATION hcoll[/<subfolder>] COMPONENT python EXCLUDE_FROM_ALL)
rule next to the target that makes it: the Python sources, hcoll/_native/libhcoll.so.0 and
hcoll/_build_info.py come from cmake/HcollPython.cmake; the torch c10d extension
(hcoll/torch/..., built when HCOLL_WITH_TORCH allows) adds its own rule. setup.py runs
`cmake --install <build> --component python --prefix <staging>` and ships whatever the staging
folder holds; it names no file of the package itself.

Build-time environment:
  HCOLL_MPI             mpich (default) or openmpi: the MPI libhcoll links (recorded in the
                        package and checked at import: one process never loads two MPIs)
  HCOLL_WITH_NCCL       AUTO (default), ON or OFF
  HCOLL_WITH_TORCH      AUTO (default: the c10d extension when torch is importable), ON or OFF
  HCOLL_CMAKE_ARGS      more CMake arguments (split like a shell would)
  HCOLL_BUILD_DIR       the CMake build folder (default build-pip/<mpi>, kept between builds)
  CMAKE_BUILD_PARALLEL_LEVEL   build jobs (default 2)
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    """The CMake project version (CMakeLists.txt's project(hcoll VERSION x.y.z)): the one source
    of the version, for the library, hcoll_version_string() and the wheel alike."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        match = re.search(r"project\(\s*hcoll\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", f.read())
    if match is None:
        raise RuntimeError("CMakeLists.txt has no project(hcoll VERSION x.y.z)")
    return match.group(1)


def _choice(name, default, allowed):
    value = os.environ.get(name, default)
    if value not in allowed:
        raise SystemExit(f"{name}={value!r}: must be one of {', '.join(allowed)}")
    return value


def cmake_build_dir(mpi):
    return os.path.abspath(os.environ.get("HCOLL_BUILD_DIR") or
                           os.path.join(ROOT, "build-pip", mpi))


def cmake_configure_args(build_dir):
    mpi = _choice("HCOLL_MPI", "mpich", ("mpich", "openmpi"))
    return [
        "cmake", "-S", ROOT, "-B", build_dir, "--no-warn-unused-cli",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DHCOLL_BUILD_TESTS=OFF", "-DHCOLL_BUILD_BENCH=OFF",
        f"-DHCOLL_MPI={mpi}",
        f"-DHCOLL_WITH_NCCL={_choice('HCOLL_WITH_NCCL', 'AUTO', ('AUTO', 'ON', 'OFF'))}",
        f"-DHCOLL_WITH_TORCH={_choice('HCOLL_WITH_TORCH', 'AUTO', ('AUTO', 'ON', 'OFF'))}",
        # The interpreter building the wheel decides whether torch is importable (a venv with
        # --system-site-packages sees Debian's torch).
        f"-DHCOLL_PYTHON={sys.executable}", f"-DPython3_EXECUTABLE={sys.executable}",
    ] + shlex.split(os.environ.get("HCOLL_CMAKE_ARGS", ""))


def _run(cmd):
    print("hcoll setup.py:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True)


def build_package(target_dir):
    """Configures and builds with CMake, installs the `python` component into a fresh staging
    folder and copies it into `target_dir` (setuptools' build_lib), replacing any hcoll/ there."""
    mpi = _choice("HCOLL_MPI", "mpich", ("mpich", "openmpi"))
    build_dir = cmake_build_dir(mpi)
    staging = os.path.join(build_dir, "python-staging")
    _run(cmake_configure_args(build_dir))
    env_jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")
    _run(["cmake", "--build", build_dir, "--parallel", env_jobs or "2"])
    shutil.rmtree(staging, ignore_errors=True)
    _run(["cmake", "--install", build_dir, "--component", "python", "--prefix", staging])
    for required in ("hcoll/__init__.py", "hcoll/_build_info.py", "hcoll/_native/libhcoll.so.0"):
        if not os.path.isfile(os.path.join(staging, required)):
            raise SystemExit(f"the CMake install component `python` lacks {required}")
    # A fresh copy: nothing of an earlier build (say, one with the torch extension) survives.
    shutil.rmtree(os.path.join(target_dir, "hcoll"), ignore_errors=True)
    shutil.copytree(staging, target_dir, dirs_exist_ok=True)


def main():
    from setuptools import Distribution, setup
    from setuptools.command.build_py import build_py

    class BuildPyWithCMake(build_py):
        """build_py that takes the package from CMake's `python` install component."""

        def run(self):
            build_package(self.build_lib)

    class BinaryDistribution(Distribution):
        """The wheel carries native code: a platform wheel (cpXY-cpXY-linux_<arch>), never
        py3-none-any; the torch extension, when built, is also tied to this Python."""

        def has_ext_modules(self):
            return True

    setup(
        version=project_version(),
        distclass=BinaryDistribution,
        cmdclass={"build_py": BuildPyWithCMake},
        # setuptools' own folders under build-pip/, away from a developer's CMake build/.
        options={"build": {"build_base": os.path.join("build-pip", "setuptools")}},
    )


if __name__ == "__main__":  # pip (setuptools.build_meta) runs this file as __main__
    main()
