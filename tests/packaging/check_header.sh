#!/usr/bin/env bash
# Compiles hcoll.h alone as strict C99 and as C++ (-Wall -Wextra -pedantic -Werror).
# Usage: check_header.sh CC CXX SRC_DIR INCLUDE_DIR...
set -euo pipefail
cc=$1 cxx=$2 src=$3
shift 3
incs=()
for d in "$@"; do incs+=(-I"$d"); done
flags=(-Wall -Wextra -pedantic -Werror -fsyntax-only)
"$cc" -std=c99 "${flags[@]}" "${incs[@]}" "$src/header_c99.c"
"$cc" -std=c11 "${flags[@]}" "${incs[@]}" "$src/header_c99.c"
"$cxx" -std=c++11 "${flags[@]}" "${incs[@]}" "$src/header_cxx.cc"
"$cxx" -std=c++17 "${flags[@]}" "${incs[@]}" "$src/header_cxx.cc"
echo "hcoll.h compiles as C99, C11, C++11 and C++17"
