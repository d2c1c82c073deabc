"""The Python package as pip installs it, without pip: CMake's install component `python`
(cmake/HcollPython.cmake; setup.py ships exactly this) installed into a temporary folder, then
imported from outside the source tree with neither HCOLL_LIBRARY nor any path into the tree.

    check_python_package.py --cmake CMAKE --build-dir BUILD --version X.Y.Z --mpi mpich|openmpi
                            --library BUILD/libhcoll.so.0 --source SRC

Checks: the lookup order (the package's own library first; $HCOLL_LIBRARY still overrides), the
build record (version = CMake's = setup.py's = the library's; the MPI recorded is the one mapped),
the import-time MPI check (another MPI already loaded: refused before libhcoll is even mapped,
naming both), and that a plain `cmake --install` leaves the component out.
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

# The other family's MPI library, by SONAME (Debian: mpich's libmpich.so.12, Open MPI's
# libmpi.so.40), for the mixed-MPI cases; either can be loaded without starting it.
OTHER_MPI = {"mpich": ("Open MPI", "libmpi.so.40"), "openmpi": ("MPICH", "libmpich.so.12")}
FAMILY = {"mpich": "MPICH", "openmpi": "Open MPI"}


def check(ok, what, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}: {what} {detail}", flush=True)
    if not ok:
        sys.exit(1)


def python(site, cwd, code, env_extra=None):
    """Runs `code` in a fresh interpreter that sees only `site` (plus the system's packages)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HCOLL_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = site
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(env_extra or {})
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def main():
    ap = argparse.ArgumentParser()
    for arg in ("cmake", "build-dir", "version", "mpi", "library", "source"):
        ap.add_argument("--" + arg, required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="hcoll-pkg-")
    try:
        site = os.path.join(tmp, "site")
        subprocess.run([a.cmake, "--install", a.build_dir, "--component", "python",
                        "--prefix", site], check=True, stdout=subprocess.DEVNULL)
        packaged = os.path.join(site, "hcoll", "_native", "libhcoll.so.0")
        check(os.path.isfile(packaged) and not os.path.islink(packaged),
              "the component holds the library as one file", packaged)

        rc, out = python(site, tmp, f"""
            import hcoll, hcoll._lib as L
            assert hcoll.__file__.startswith({site!r} + "/"), hcoll.__file__
            assert L.candidate_paths()[0] == L.packaged_path() == {packaged!r}, L.candidate_paths()
            assert hcoll.library_path == {packaged!r}, hcoll.library_path
            info = hcoll.build_info
            assert info["LIBRARY"] == "hcoll/" + L.PACKAGED_DIR + "/" + L.LIBRARY_NAME, info
            assert hcoll.__version__ == info["VERSION"] == {a.version!r}, (hcoll.__version__, info)
            assert info["HCOLL_MPI"] == {a.mpi!r} and info["MPI_FAMILY"] == {FAMILY[a.mpi]!r}, info
            assert hcoll.mpi_version() == info["MPI_FAMILY"] + " " + info["MPI_VERSION"], \\
                (hcoll.mpi_version(), info)
            maps = open("/proc/self/maps").read()
            assert "/" + info["MPI_LIBRARY"] in maps, ("recorded MPI library not mapped", info)
            print("OK", info)
            """)
        check(rc == 0 and "OK" in out, "packaged library found first; build record right", out)

        rc, out = python(site, tmp, f"""
            import hcoll
            assert hcoll.__file__.startswith({site!r} + "/"), hcoll.__file__
            assert hcoll.library_path == {a.library!r}, hcoll.library_path
            assert hcoll.build_info is None, hcoll.build_info
            print("OK")
            """, {"HCOLL_LIBRARY": a.library})
        check(rc == 0 and "OK" in out, "HCOLL_LIBRARY still overrides the packaged library", out)

        other_family, other_soname = OTHER_MPI[a.mpi]
        rc, out = python(site, tmp, f"""
            import ctypes
            ctypes.CDLL({other_soname!r})  # as mpi4py of the other MPI would have
            try:
                import hcoll
                raise SystemExit("import hcoll succeeded next to {other_family}")
            except ImportError as e:
                assert type(e).__name__ == "MixedMpiError", type(e)
                print("MESSAGE", e)
            # Refused from the build record, before the library (and its MPI) was loaded.
            assert "libhcoll.so" not in open("/proc/self/maps").read(), "libhcoll was loaded"
            print("OK")
            """)
        check(rc == 0 and "OK" in out and FAMILY[a.mpi] in out and other_family in out and
              other_soname in out, f"import next to {other_family} refused before loading, "
              "naming both", out)

        have_mpi4py = importlib.util.find_spec("mpi4py") is not None
        if have_mpi4py and a.mpi == "mpich":  # Debian's mpi4py is built against Open MPI
            rc, out = python(site, tmp, """
                import mpi4py
                mpi4py.rc.initialize = False
                mpi4py.rc.finalize = False
                from mpi4py import MPI
                try:
                    import hcoll
                    raise SystemExit("import hcoll succeeded after mpi4py (Open MPI)")
                except ImportError as e:
                    print("MESSAGE", e)
                print("OK")
                """)
            check(rc == 0 and "OK" in out and "MPICH" in out and "Open MPI" in out,
                  "import after Debian's mpi4py (Open MPI) refused, naming both", out)

        if importlib.util.find_spec("torch") is not None:
            rc, out = python(site, tmp, f"""
                import hcoll.torch
                assert hcoll.torch.__file__.startswith({site!r} + "/"), hcoll.torch.__file__
                print("OK")
                """)
            check(rc == 0 and "OK" in out, "hcoll.torch imports from the component", out)

        # setup.py takes the wheel's version from CMakeLists.txt: the same as the build's.
        spec = importlib.util.spec_from_file_location("hcoll_setup",
                                                      os.path.join(a.source, "setup.py"))
        setup_py = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(setup_py)  # defines functions only: setup() runs as __main__
        check(setup_py.project_version() == a.version, "setup.py's version is CMake's",
              f"{setup_py.project_version()} / {a.version}")

        plain = os.path.join(tmp, "plain")
        subprocess.run([a.cmake, "--install", a.build_dir, "--prefix", plain], check=True,
                       stdout=subprocess.DEVNULL)
        check(not os.path.exists(os.path.join(plain, "hcoll")) and
              os.path.isdir(os.path.join(plain, "include", "hcoll")),
              "a plain cmake --install leaves the Python component out")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
