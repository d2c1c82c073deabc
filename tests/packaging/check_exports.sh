#!/usr/bin/env bash
# Checks libhcoll.so.0's dynamic symbol table against the contract:
#   - SONAME is libhcoll.so.0;
#   - every defined dynamic symbol is hcoll_* (the version script works);
#   - none of NVIDIA/Mellanox HCOLL's 19 public names appears (they would clash with libhcoll.so.1);
#   - calls to our own exports bind inside the library, which is marked NODELETE;
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

# NVIDIA HCOLL's full public list (hcoll/api/hcoll_api.h), as in src/hcoll.map. Checked against
# every dynamic symbol, defined or not: we must neither export nor import any of them.
nvidia="hcoll_init hcoll_init_with_opts hcoll_read_init_opts hcoll_free_init_opts
  init_hcoll_collectives hcoll_create_context hcoll_destroy_context hcoll_group_destroy_notify
  hcoll_context_free hcoll_finalize hcoll_set_runtime_tag_offset hcoll_get_info
  hcoll_check_mem_release_cb_needed hcoll_mem_unmap hcoll_rte_p2p_disabled_notify
  hcoll_progress_fn hcoll_get_version hcoll_collectives hcoll_rte_functions"
[ "$(echo $nvidia | wc -w)" -eq 19 ] || err "the NVIDIA list lost an entry"
all=$(nm -D "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
for n in $nvidia; do
  echo "$all" | grep -qx "$n" && err "dynamic symbol table names NVIDIA HCOLL's $n"
done

# Our own calls bind inside the library: no PLT/GOT relocation may name an hcoll_* symbol
# (-Bsymbolic-functions), and the library stays resident after dlclose (-z nodelete).
relocs=$(readelf -rW "$lib" | awk '$5 ~ /^hcoll_/ {print $5}' | sort -u)
[ -z "$relocs" ] || err "relocations against our own exports (not bound inside): $relocs"
readelf -d "$lib" | grep -q 'FLAGS_1.*NODELETE' || err "not linked with -z nodelete"

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
for n in $nvidia; do
  echo "$declared" | grep -qx "$n" && err "hcoll.h declares NVIDIA HCOLL's $n"
done
extra=$(comm -13 <(echo "$declared") <(echo "$defined") || true)
[ -z "$extra" ] || err "exported but not declared in hcoll.h: $extra"

[ $fail -eq 0 ] && echo "exports ok: $count functions, SONAME $soname"
exit $fail
