#!/usr/bin/env bash
# Checks libhcoll.so.0's dynamic symbol table against the contract:
#   - SONAME is libhcoll.so.0;
#   - every defined dynamic symbol is hcoll_* (the version script works);
#   - none of NVIDIA/Mellanox HCOLL's names is defined (they would clash with libhcoll.so.1);
#   - every function declared in hcoll.h is exported, and the dlopen plugin example and the
#     Python binding both know every one of them.
# Usage: check_exports.sh LIB HEADER PLUGIN_C PYTHON_LIB_PY
set -euo pipefail
lib=$1 header=$2 plugin=$3 pylib=$4
fail=0
err() { echo "FAIL: $*"; fail=1; }

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libhcoll.so.0" ] || err "SONAME is '$soname', not libhcoll.so.0"

defined=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
[ -n "$defined" ] || err "no defined dynamic symbols"
bad=$(echo "$defined" | grep -v '^hcoll_' || true)
[ -z "$bad" ] || err "symbols outside hcoll_*: $(echo $bad | head -c 400)"

for n in hcoll_init hcoll_finalize hcoll_context_create hcoll_context_free hcoll_progress_fn \
         hcoll_collectives hcoll_rte_functions hcoll_group_destroy_notify hcoll_read_init_opts; do
  echo "$defined" | grep -qx "$n" && err "exports NVIDIA HCOLL's $n"
done

# Function names from the header: 'HCOLL_API <type> hcoll_name(' (possibly '<type>* hcoll_...').
declared=$(tr '\n' ' ' < "$header" | grep -o 'HCOLL_API [^;(]*(' \
           | grep -o 'hcoll_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort -u)
count=$(echo "$declared" | wc -l)
[ "$count" -ge 30 ] || err "found only $count declarations in $header (parser broken?)"
for fn in $declared; do
  echo "$defined" | grep -qx "$fn" || err "$fn is declared in hcoll.h but not exported"
  grep -q "X($fn)" "$plugin" || err "$fn is missing from the plugin example's table"
  grep -q "\"$fn\"" "$pylib" || err "$fn is missing from the Python binding's prototypes"
done
extra=$(comm -13 <(echo "$declared") <(echo "$defined") || true)
[ -z "$extra" ] || err "exported but not declared in hcoll.h: $extra"

[ $fail -eq 0 ] && echo "exports ok: $count functions, SONAME $soname"
exit $fail
