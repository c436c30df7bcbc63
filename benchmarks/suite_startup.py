"""Start-up cost of the CPU engine, each figure from a fresh process: ``import semiring``, the first
``pairwise_distances`` call of each measure family on a small input, and the ``semiring knn`` command.

Run from the repository root (the project installed, ``pip install -e .``)::

    python -m benchmarks startup --seed 0 --json benchmarks/results/startup.json

Every probe runs in a new Python process whose kernel caches (``$SEMIRING_CACHE_DIR``, and numba's,
``$NUMBA_CACHE_DIR``, inside it) are a folder of this run (``--cache-dir``, else a fresh temporary one): the first
process of each probe compiles what earlier probes have not (``cold``), the next ``--repeats`` find the kernels on
disk (``warm``, the median reported), as a user's second session on the machine would.  ``numba floor`` is numba's own share: importing it and the first call of a
one-loop kernel from its disk cache.  For a measure, a process times its imports, the first call (the kernels
loaded from the cache, or compiled) and the same call again (the work alone); the start-up overhead of the call is
the difference of the two.  ``semiring knn`` is timed from outside, as the shell would (the wall clock of the
whole process).  The JSON records every figure, the command line and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .record import commit, engine_digest, engine_digests, versions

# One measure per family of kernels: the expanded intersection products (dot product + norms), the binary ones,
# a weighted intersection, the union products (sum and max monoids, a parameter, a logarithm), and a semiring
# of the user's own (the generic path).
MEASURES = ("cosine", "euclidean", "jaccard", "hellinger", "cityblock", "chebyshev", "minkowski", "jensenshannon")
OWN_SEMIRING = "semiring.pairwise"

# A new process: seeded small input, then imports, first call and the call again, each timed, as JSON on stdout.
CALL_CHILD = """
import time, json, sys
t0 = time.perf_counter()
import numpy as np, scipy.sparse as sp, semiring
from semiring import distances
t1 = time.perf_counter()
measure, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
X = sp.random(200, 500, density=0.02, format="csr", random_state=rng, dtype=np.float64)
X.data = np.abs(X.data) + 0.1
if measure == "semiring.pairwise":
    sr = semiring.Semiring(semiring.monoid.min, semiring.binary_op("x * y + x", name="startup_probe"))
    call = lambda: semiring.pairwise(X, X, sr, backend="cpu")
else:
    call = lambda: distances.pairwise_distances(X, metric=measure, backend="cpu")
t2 = time.perf_counter()
call()
t3 = time.perf_counter()
call()
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_call_s": t3 - t2, "again_s": t4 - t3,
                  "numba_threads": __import__("numba").get_num_threads()}))
"""

# numba's own floor: a new process imports it and calls a one-loop function from its disk cache (numba sets up its
# typing and target contexts on the first call of any kernel, whatever the kernel).
FLOOR_MODULE = """
import numba

@numba.njit(cache=True, nogil=True)
def total(a):
    s = 0.0
    for x in a:
        s += x
    return s
"""
FLOOR_CHILD = """
import time, json, sys
t0 = time.perf_counter()
import numpy as np, scipy.sparse
t1 = time.perf_counter()
import numba
t2 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import startup_floor_probe as probe
a = np.ones(8)
t3 = time.perf_counter()
probe.total(a)
t4 = time.perf_counter()
probe.total(a)
t5 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "numba_import_s": t2 - t1, "first_call_s": t4 - t3, "again_s": t5 - t4}))
"""

IMPORT_CHILD = """
import time, json, sys
t0 = time.perf_counter()
import semiring
t1 = time.perf_counter()
heavy = ("numba", "scipy.spatial", "sklearn", "cupy", "pandas", "matplotlib")
print(json.dumps({"import_s": t1 - t0, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, required=True, help="seed of the small input of the measure probes")
    p.add_argument("--repeats", type=int, default=3, help="warm processes per probe (the median is reported)")
    p.add_argument("--measures", default=",".join((*MEASURES, OWN_SEMIRING)), help="comma-separated probes")
    p.add_argument("--cache-dir", type=Path, default=None, help="kernel cache of the run (default: a fresh one)")
    p.add_argument("--json", type=Path, default=None, help="also write the results to this JSON file")
    return p.parse_args(argv)


def run(cmd: list[str], env: dict) -> tuple[float, str]:
    """(wall seconds, stdout) of a new process; its failure stops the benchmark with its error output."""
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=1800)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return wall, out.stdout


def probe(cmd: list[str], env: dict, repeats: int) -> dict:
    """The cold process (empty cache for what it uses) and the warm ones: wall clock and what each printed."""
    runs = []
    for _ in range(1 + repeats):
        wall, stdout = run(cmd, env)
        last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
        record = {"wall_s": wall}
        if last.startswith("{"):
            record.update(json.loads(last))
        runs.append(record)
    cold, warm = runs[0], runs[1:]
    median = {key: statistics.median(r[key] for r in warm) for key, v in warm[0].items() if isinstance(v, float)}
    return {"cold": cold, "warm_median": median, "warm": warm}


def semiring_command() -> list[str]:
    """The installed ``semiring`` command next to this Python, else the same entry point through ``-c``."""
    script = Path(sys.executable).with_name("semiring")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from semiring.cli import main; sys.exit(main())"]


def main(argv=None) -> int:
    args = parse_args(argv)
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="semiring-startup-"))
    # numba's cache too, so that the first process of a probe compiles what the package's folder may hold already
    # (the kernels that depend on no op are cached beside their module by default).
    env = {**os.environ, "SEMIRING_CACHE_DIR": str(cache), "NUMBA_CACHE_DIR": str(cache / "numba")}
    results: dict[str, dict] = {}

    floor = cache / "startup_floor"
    floor.mkdir(parents=True, exist_ok=True)
    (floor / "startup_floor_probe.py").write_text(FLOOR_MODULE)
    r = results["numba floor"] = probe([sys.executable, "-c", FLOOR_CHILD, str(floor)], env, args.repeats)
    w = r["warm_median"]
    w["floor_s"] = w["numba_import_s"] + w["first_call_s"]
    print(
        f"numba floor: import numba {w['numba_import_s']:.3f} s + first call of a cached one-loop kernel "
        f"{w['first_call_s']:.3f} s = {w['floor_s']:.3f} s (numpy + scipy.sparse imports {w['import_s']:.3f} s)",
        flush=True,
    )
    results["import semiring"] = probe([sys.executable, "-c", IMPORT_CHILD], env, args.repeats)
    print(f"import semiring: {results['import semiring']['warm_median']['import_s']:.3f} s", flush=True)
    for measure in args.measures.split(","):
        r = probe([sys.executable, "-c", CALL_CHILD, measure, str(args.seed)], env, args.repeats)
        w = r["warm_median"]
        w["overhead_s"] = statistics.median(x["first_call_s"] - x["again_s"] for x in r["warm"])
        results[measure] = r
        print(
            f"{measure:>18}: first call {w['first_call_s']:.3f} s (overhead {w['overhead_s']:.3f} s, "
            f"work {w['again_s'] * 1e3:.1f} ms; imports {w['import_s']:.3f} s; process {w['wall_s']:.2f} s); "
            f"cold first call {r['cold']['first_call_s']:.2f} s",
            flush=True,
        )
    knn = probe([*semiring_command(), "knn"], env, args.repeats)
    results["semiring knn"] = knn
    print(f"semiring knn: {knn['warm_median']['wall_s']:.2f} s wall (cold {knn['cold']['wall_s']:.2f} s)", flush=True)

    if args.cache_dir is None:
        shutil.rmtree(cache, ignore_errors=True)
    if args.json:
        payload = {
            "command": " ".join([sys.executable, *sys.argv]),
            "commit": commit(),
            "engine_digest": engine_digest(),
            "engine_digests": engine_digests(),
            "seed": args.seed,
            "versions": versions(),
            "machine": {
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "results": results,
        }
        args.json.write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
