"""The Python binding's copy of the C ABI's numbers (bindings/python/hcoll/_lib.py) against
include/hcoll/hcoll.h, so that a drift fails CI instead of a caller (COMM_STATS_FIELD_ALL once
stayed 0x7F when the header's became 0xff, and caller_rounds always read 0).

The C compiler evaluates every HCOLL_* constant of the header (object-like macros with a value,
enum members, the status X-macro); _lib.py is read with `ast`, without loading the library. Every
header constant whose name without the HCOLL_ prefix is defined in _lib.py must have the same
value; every status, dtype and reduce op, and every *_FIELD_ALL, must be there; STATS_FIELDS must
list the stats struct's fields in their bit order.
Usage: check_constants.py CC HCOLL_H _LIB_PY INCLUDE_DIR...
"""

import ast
import os
import re
import subprocess
import sys
import tempfile

# Macros that are not values the binding could copy.
NOT_VALUES = {"HCOLL_API", "HCOLL_HCOLL_H_", "HCOLL_STATUS_MAP", "HCOLL_COMM_NULL",
              "HCOLL_REQUEST_NULL"}


def header_names(text):
    """Every HCOLL_* constant the header defines, in order."""
    names = []
    for m in re.finditer(r"^#define (HCOLL_[A-Z0-9_]+)[ \t]+\S", text, re.M):
        if m.group(1) not in NOT_VALUES and not m.group(1).endswith("_"):
            names.append(m.group(1))
    names += re.findall(r"^\s*(HCOLL_[A-Z0-9_]+)\s*=", text, re.M)
    names += ["HCOLL_" + n for n in re.findall(r"XX\(([A-Z0-9_]+),", text)]
    return list(dict.fromkeys(names))


def header_values(cc, header, includes, names):
    """name -> value, as the C compiler evaluates them."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "values.c")
        exe = os.path.join(tmp, "values")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include "hcoll/hcoll.h"\nint main(void) {\n')
            for n in names:
                f.write(f'  printf("%s %lld\\n", "{n}", (long long)({n}));\n')
            f.write("  return 0;\n}\n")
        subprocess.run([cc, "-std=c99", *[f"-I{d}" for d in includes], src, "-o", exe],
                       check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return {n: int(v) for n, v in (line.split() for line in out.splitlines())}


def evaluate(node, env):
    """A module-level constant expression of _lib.py: numbers, names, -, <<, |, +."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand, env)
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, env), evaluate(node.right, env)
        ops = {ast.LShift: lambda: a << b, ast.BitOr: lambda: a | b, ast.Add: lambda: a + b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    raise ValueError(ast.dump(node))


def binding_values(path):
    """Upper-case name -> int for every constant _lib.py defines at module level."""
    tree = ast.parse(open(path).read())
    env, stats_fields = {}, None
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name) and target.id == "STATS_FIELDS":
            stats_fields = ast.literal_eval(value)
        elif isinstance(target, ast.Name) and target.id.isupper():
            try:
                env[target.id] = evaluate(value, env)
            except ValueError:
                pass  # not a number (a table, a type)
        elif (isinstance(target, ast.Tuple) and isinstance(value, ast.Call)
              and getattr(value.func, "id", "") == "range"):
            for i, elt in enumerate(target.elts):
                env[elt.id] = i
    return env, stats_fields


def main():
    cc, header, lib_py, includes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    text = open(header).read()
    names = header_names(text)
    c = header_values(cc, header, includes, names)
    py, stats_fields = binding_values(lib_py)
    errors = []
    checked = 0
    for name, value in c.items():
        short = name[len("HCOLL_"):]
        if short in py:
            checked += 1
            if py[short] != value:
                errors.append(f"{short} = {py[short]:#x} in _lib.py, {name} = {value:#x} in hcoll.h")
    # What the binding must copy: every status, dtype and op, and every mask's ALL.
    required = ["HCOLL_" + n for n in re.findall(r"XX\(([A-Z0-9_]+),", text)]
    for enum in ("hcoll_dtype_t", "hcoll_reduce_op_t"):
        body = re.search(r"typedef enum \{([^}]*)\}\s*" + enum, text).group(1)
        required += re.findall(r"(HCOLL_[A-Z0-9_]+)\s*=", body)
    required += [n for n in c if n.endswith("_FIELD_ALL")]
    for name in required:
        if name[len("HCOLL_"):] not in py:
            errors.append(f"{name} is not in _lib.py")
    # STATS_FIELDS[i] is the field of bit i.
    bits = [n for n in names if n.startswith("HCOLL_COMM_STATS_FIELD_") and n != "HCOLL_COMM_STATS_FIELD_ALL"]
    if stats_fields is None or len(stats_fields) != len(bits):
        errors.append(f"STATS_FIELDS has {stats_fields}, hcoll.h {len(bits)} stats fields")
    else:
        for i, name in enumerate(bits):
            if c[name] != 1 << i:
                errors.append(f"{name} is not bit {i}: STATS_FIELDS' order cannot follow it")
    for e in errors:
        print("DRIFT:", e)
    if errors:
        return 1
    print(f"_lib.py agrees with hcoll.h: {checked} constants compared, {len(required)} required")
    return 0


if __name__ == "__main__":
    sys.exit(main())
