#!/usr/bin/env bash
# Installs hcoll into a fresh prefix, then builds an out-of-tree C program against the installed
# copy twice, with find_package(hcoll 0.1 CONFIG) and with pkg-config, and runs both on 2 ranks.
# Usage: install_consumer.sh BUILD_DIR WORK_DIR PROGRAM.c CC MPIEXEC [LAUNCHER_FLAGS...]
set -euo pipefail
build=$1 work=$2 program=$3 cc=$4 mpiexec=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }
mv "$work.install.log" "$work/install.log"

libdir=$(dirname "$(find "$prefix" -name libhcoll.so.0 | head -n1)")
for f in include/hcoll/hcoll.h include/hcoll/config.h; do
  [ -f "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
for f in libhcoll.so libhcoll.so.0 cmake/hcoll/hcollConfig.cmake \
         cmake/hcoll/hcollConfigVersion.cmake cmake/hcoll/hcollTargets.cmake pkgconfig/hcoll.pc; do
  [ -e "$libdir/$f" ] || { echo "FAIL: $libdir/$f not installed"; exit 1; }
done
if find "$prefix" -name '*.h' | grep -Ev '/hcoll/(hcoll|config)\.h$'; then
  echo "FAIL: internal headers installed"; exit 1
fi

echo "== find_package(hcoll 0.1 CONFIG REQUIRED)"
cmake -S "$here/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCONSUMER_SOURCE="$program" > "$work/cmake.log" 2>&1 \
  || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake" > "$work/cmake-build.log" 2>&1 || { cat "$work/cmake-build.log"; exit 1; }

echo "== pkg-config hcoll"
export PKG_CONFIG_PATH=$libdir/pkgconfig
ver=$(pkg-config --modversion hcoll)
[ "$ver" = "0.1.0" ] || { echo "FAIL: pkg-config version '$ver'"; exit 1; }
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$program" $(pkg-config --cflags --libs hcoll) \
      -Wl,-rpath,"$(pkg-config --variable=libdir hcoll)" -o "$work/pc-consumer"

for exe in "$work/cmake/consumer" "$work/pc-consumer"; do
  # The program must run against the installed library, not the build tree's.
  resolved=$(ldd "$exe" | awk '/libhcoll.so.0/ {print $3}')
  [ "$(readlink -f "$resolved")" = "$(readlink -f "$libdir/libhcoll.so.0")" ] \
    || { echo "FAIL: $exe resolves libhcoll.so.0 to '$resolved'"; exit 1; }
  echo "== $mpiexec -n 2 $* $exe"
  timeout 60 "$mpiexec" -n 2 "$@" "$exe"
done
echo "install + find_package + pkg-config consumers ok"
