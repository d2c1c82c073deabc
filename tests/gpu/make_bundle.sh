#!/usr/bin/env bash
# Builds the GPU bundle: what a bare GPU machine (CUDA, CMake, ninja, PyTorch with the pip NCCL,
# but no MPI, spdlog or Catch2, and no network) lacks to build and run tests/gpu. Run it on a
# Debian 12 (bookworm) amd64 machine with network; it never installs anything into /:
#   apt-get download  -> the .deb files (the host's apt lists pick the versions)
#   dpkg -x           -> unpacked into $BUNDLE (default .gpu-bundle, ignored by git), so the
#                        files land under $BUNDLE/usr/{bin,include,lib/x86_64-linux-gnu,...}
# then trims what the check never uses (static archives, docs, man pages, Fortran/C++ MPI
# bindings, UCX modules whose libraries a bare machine lacks), makes MPICH's wrapper compiler
# relocatable, checks with ldd that every library resolves inside the bundle or to glibc/libstdc++,
# and prints the size (it travels with the working tree, 64 MiB in all).
# tests/gpu/device_check.sh uses it; docs/gpu.md says how.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=${BUNDLE:-.gpu-bundle}
ARCH=x86_64-linux-gnu
[ "$(dpkg --print-architecture)" = amd64 ] || { echo "make_bundle: needs an amd64 Debian host" >&2; exit 2; }

# MPICH and the libraries ldd names for libmpich.so.12 and mpiexec.hydra/hydra_pmi_proxy beyond
# glibc; spdlog + fmt (Debian's spdlog is a compiled library on top of an external fmt); Catch2 v2.
PACKAGES=(mpich libmpich12 libmpich-dev libhwloc15 libucx0 libnuma1 libudev1 libslurm38
          libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 catch2)

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
BUNDLE=$(cd "$BUNDLE" && pwd)
DEBS=$(mktemp -d)
trap 'rm -rf "$DEBS"' EXIT
chmod 755 "$DEBS"  # apt's _apt user downloads into it
(cd "$DEBS" && apt-get download "${PACKAGES[@]}")
for deb in "$DEBS"/*.deb; do
  dpkg -x "$deb" "$BUNDLE"
  dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >>"$BUNDLE/PACKAGES"
done

# ---- trim ---------------------------------------------------------------------------------------
U=$BUNDLE/usr
rm -rf "$U/share/doc" "$U/share/man" "$U/share/lintian" "$U/share/doc-base" "$U/share/bug" \
       "$BUNDLE/etc/systemd" "$BUNDLE/lib/systemd" "$U/lib/systemd"
# Static archives, except Catch2's (its CMake targets name them: configuring fails without them).
find "$BUNDLE" -name '*.a' ! -name 'libCatch2*' -delete
# Fortran and C++ MPI bindings and the mpicxx/mpif* wrappers: hcoll uses MPI's C API only.
rm -f "$U/lib/$ARCH"/libmpichfort.so* "$U/lib/$ARCH"/libmpichcxx.so* \
      "$U/include/$ARCH/mpich"/*.mod "$U/include/$ARCH/mpich"/mpif.h
rm -rf "$U/lib/$ARCH/fortran"
find "$U/bin" -name 'mpif*' -delete
find "$U/bin" -name 'mpicxx*' -delete -o -name 'mpic++*' -delete
# libudev1 and libslurm38 ship their libraries under /lib (usrmerge): one library folder is
# simpler to put on LD_LIBRARY_PATH.
if [ -d "$BUNDLE/lib/$ARCH" ]; then
  cp -a "$BUNDLE/lib/$ARCH"/. "$U/lib/$ARCH"/
  rm -rf "$BUNDLE/lib"
fi

# The wrapper compiler hard-codes prefix=/usr: make it find the bundle from its own location,
# so that CMake's FindMPI (which runs `mpicc.mpich -show`) gets the bundle's -I/-L.
sed -i -e 's|^prefix=/usr$|prefix=$(cd "$(dirname "$(readlink -f "$0")")/.." \&\& pwd)|' \
       -e 's|^exec_prefix=/usr$|exec_prefix=$prefix|' \
       -e 's|^sysconfdir=/etc/mpich$|sysconfdir=$prefix/../etc/mpich|' \
       -e "s|^includedir=/usr/include/$ARCH/mpich\$|includedir=\$prefix/include/$ARCH/mpich|" \
       -e "s|^libdir=/usr/lib/$ARCH\$|libdir=\$prefix/lib/$ARCH|" "$U/bin/mpicc.mpich"
grep -q '^prefix=\$(cd' "$U/bin/mpicc.mpich" || { echo "make_bundle: mpicc.mpich not relocated" >&2; exit 1; }

# ---- check --------------------------------------------------------------------------------------
# Libraries a generic glibc Linux has; everything else must resolve inside the bundle.
SYSTEM='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|librt|libpthread|libresolv|libstdc\+\+|libgcc_s)\.so'
LIBDIR=$U/lib/$ARCH
# Prints "needed -> where" for each library `$1` needs that is neither in the bundle nor glibc's
# or GCC's runtime. ldd still searches the host's folders, so a host library is reported, not used.
outside() {
  local lib path
  while read -r lib _ path _; do
    case "$path" in
      "$BUNDLE"/*) ;;
      *) [[ $lib =~ $SYSTEM ]] || echo "$lib -> $path" ;;
    esac
  done < <(env -i LD_LIBRARY_PATH="$LIBDIR" ldd "$1" 2>/dev/null | grep '=>')
}
# UCX loads its transport modules with dlopen; drop those that need libraries (InfiniBand verbs,
# rdmacm, netlink) a bare machine lacks. UCX skips a missing module silently.
for mod in "$LIBDIR"/ucx/*.so*; do
  [ -n "$(outside "$mod")" ] && rm -f "$mod"
done
find "$LIBDIR/ucx" -xtype l -delete  # links to the modules just removed
bad=0
while IFS= read -r f; do
  file -L "$f" | grep -q 'ELF 64-bit' || continue
  deps=$(outside "$f")
  if [ -n "$deps" ]; then echo "make_bundle: ${f#"$BUNDLE"/} needs: $deps" >&2; bad=1; fi
done < <(find "$U/bin" "$LIBDIR" -type f \( -perm -u+x -o -name '*.so*' \))
[ $bad = 0 ] || { echo "make_bundle: FAIL: libraries outside the bundle (above)" >&2; exit 1; }
echo "make_bundle: $(wc -l <"$BUNDLE/PACKAGES") packages in $BUNDLE; every ELF file resolves inside it"
du -sh "$BUNDLE"
