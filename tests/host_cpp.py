"""The CUDA rendering of an expression compiled as host C++ (the same C math library), for tests without a GPU.

``printed(tmp_path, body)`` wraps ``body`` (statements that ``printf`` doubles) in the preamble the rendered
expressions need, builds it with ``g++ -O0 -fno-fast-math`` and returns what it printed, one token each.
"""

from __future__ import annotations

import shutil
import subprocess

HAS_GXX = shutil.which("g++") is not None

PREAMBLE = [
    "#include <cmath>",
    "#include <cstdio>",
    "#include <limits>",
    "using namespace std;",
    "typedef double T;",
    "static double sr_inf() { return numeric_limits<double>::infinity(); }",
    "static double sr_nan() { return numeric_limits<double>::quiet_NaN(); }",
]


def printed(tmp_path, body: list[str]) -> list[str]:
    src, exe = tmp_path / "forms.cpp", tmp_path / "forms"
    src.write_text("\n".join([*PREAMBLE, "int main() {", *body, "  return 0; }"]))
    subprocess.run(["g++", "-O0", "-fno-fast-math", "-o", str(exe), str(src)], check=True, capture_output=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
