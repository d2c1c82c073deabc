"""One MPI per process. MPI implementations are not ABI-compatible: an MPICH build of libhcoll in
a process that has also loaded Open MPI (Debian's mpi4py) mixes the two libraries' symbols and
crashes inside MPI. This module names the MPI families a process has mapped and refuses a second
one with a message naming both:

  - at import (hcoll._lib), before libhcoll's MPI is made global: from the build record
    (_build_info.py) of an installed package before the library is even loaded, and from the
    loaded library's own hcoll_mpi_version() otherwise (a source tree, $HCOLL_LIBRARY);
  - at hcoll.initialize(), for an MPI loaded after hcoll was imported (hcoll._api).

Linux only (/proc/self/maps); elsewhere nothing is found and nothing is refused.
"""

import os

# Shared-object name prefixes of each family's MPI library (what the loader maps).
LIBRARY_PREFIXES = {"MPICH": ("libmpich",), "Open MPI": ("libmpi.so",)}
BUILD_CHOICE = {"MPICH": "mpich", "Open MPI": "openmpi"}


class MixedMpiError(ImportError):
    """`import hcoll` in a process that has already loaded another MPI than hcoll's."""


def family_of(mpi_version):
    """"MPICH" or "Open MPI" for a hcoll_mpi_version() string ("MPICH 4.0.2"), else None."""
    for family in LIBRARY_PREFIXES:
        if mpi_version.startswith(family):
            return family
    return None


def mapped_families():
    """{family: path of its library} for every MPI family this process has mapped."""
    found = {}
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) < 6:
                    continue
                path = fields[5].strip()
                base = os.path.basename(path)
                for family, prefixes in LIBRARY_PREFIXES.items():
                    if any(base.startswith(p) for p in prefixes):
                        found.setdefault(family, path)
    except OSError:
        pass
    return found


def foreign_mpi(built_family):
    """(family, path) of an MPI of another family than `built_family` this process has mapped,
    or None."""
    if built_family not in LIBRARY_PREFIXES:
        return None
    for family, path in sorted(mapped_families().items()):
        if family != built_family:
            return family, path
    return None


def mixed_message(hcoll_library, built, other, other_path):
    """The one wording for every place that refuses a second MPI. `built`: what hcoll links
    ("MPICH 4.0.2 (libmpich.so.12)"), `other`: the other family ("Open MPI")."""
    built_family = family_of(built) or built
    return (f"this hcoll ({hcoll_library}) was built against {built}, but the process has "
            f"also loaded {other} ({other_path}; through mpi4py?): one process can use only "
            f"one MPI. Use an hcoll built for {other} (HCOLL_MPI={BUILD_CHOICE.get(other, '?')}: "
            f"`HCOLL_MPI={BUILD_CHOICE.get(other, '?')} pip install --no-build-isolation .`, or "
            f"cmake -DHCOLL_MPI={BUILD_CHOICE.get(other, '?')}), or an mpi4py built against "
            f"{built_family}")


def check_import(hcoll_library, built):
    """Raises MixedMpiError when the process has mapped an MPI of another family than `built`
    (a hcoll_mpi_version()-style string, optionally followed by the library's name)."""
    other = foreign_mpi(family_of(built))
    if other is not None:
        raise MixedMpiError(mixed_message(hcoll_library, built, *other))
