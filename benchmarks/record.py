"""Results files that explain themselves: what ran, on what, from which code, and every check's outcome.

``Results(suite, args)`` holds a run's records; ``add(row)`` appends one and rewrites the file at once (a run
cut short keeps what it measured), ``save()`` writes it.  The file is JSON::

    {"meta": {"suite", "command", "commit", "engine_digest", "seed", "started", "machine", "versions", "args"},
     "rows": [...],                        # one per measurement, the suite's own fields
     "checks": {"passed": n, "failed": n, "failures": [...]}}

``commit`` is the checkout's ``git rev-parse --short HEAD`` with "+dirty" where the tree has uncommitted
changes, or ``$COMMIT`` where there is no git metadata (a copy of the tree); ``engine_digest`` is a hash of the
engine's source (``semiring/``, ``distances/``, ``kernels/``) as it ran, so the docs generator can tell, with no
git at hand, whether the code measured is the code of today; ``engine_digests`` the same of each scope
(``SCOPES``: the CPU engine's figures do not depend on ``kernels/cuda/``, the GPU engine's on ``kernels/cpu/``).

A check is a dict with ``ok`` (True or False), ``subject`` (ours, or the peer's name), ``against`` (the
oracle) and what it measured; ``check_rows`` collects every check of every row for the summary, so that a
failed check of ours or a peer's shows in the file and in the docs, never only in a log.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
ENGINE_FOLDERS = ("semiring", "distances", "kernels")
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".h", ".c", ".cpp")
# The engine source a figure depends on, by the paths left out: all of it, or all but the other engine's
# kernels.  A figure of the CPU engine's calls runs no code of kernels/cuda/ (the GPU engine is loaded only for
# a GPU call), and a figure of GPU calls none of kernels/cpu/, so a change to one engine's kernels leaves the
# other's figures of today.  semiring/ and distances/ are in every scope.
SCOPES = {"all": (), "cpu": ("kernels/cuda/",), "cuda": ("kernels/cpu/",)}


def git(*args: str, cwd: Path = ROOT) -> str:
    """A git command's output in the checkout, or "" where git or the metadata is missing."""
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], check=False, capture_output=True, text=True)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def in_history(rev: str) -> bool:
    """Whether commit ``rev`` is HEAD or one of its ancestors (False without git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", rev, "HEAD"], capture_output=True, check=False
        )
    except OSError:
        return False
    return out.returncode == 0


def commit() -> str:
    """The commit of the code measured: ``$COMMIT`` where set (the lent GPU machine's copy of the tree, whose
    ``.git``, where it has one, is not the tree's: ``stamp`` checks it against the engine digest), else this
    checkout's short HEAD with "+dirty" where the tree has uncommitted changes, else "unknown"."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]
    head = git("rev-parse", "--short", "HEAD")
    if head:
        return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    return "unknown"


def blob_sha(data: bytes) -> str:
    """Git's object name of a file's content (so the digest can be computed from ``git ls-tree`` too)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def digest_of(entries, scope: str = "all") -> str:
    """The engine digest of (path, blob sha) pairs (paths relative to the repository root) in ``scope``."""
    left_out = SCOPES[scope]
    lines = sorted(
        f"{path} {sha}" for path, sha in entries if path.endswith(SOURCE_SUFFIXES) and not path.startswith(left_out)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def engine_digest(root: Path = ROOT, scope: str = "all") -> str:
    """The digest of the engine's source files (those of ``scope``) in the working tree at ``root``."""
    entries = []
    for folder in ENGINE_FOLDERS:
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                entries.append((path.relative_to(root).as_posix(), blob_sha(path.read_bytes())))
    return digest_of(entries, scope)


def engine_digests(root: Path = ROOT) -> dict[str, str]:
    """The digest of every scope but ``all`` (a results file's ``engine_digests``; ``engine_digest`` is all's)."""
    return {scope: engine_digest(root, scope) for scope in SCOPES if scope != "all"}


def engine_digest_at(rev: str, scope: str = "all") -> str | None:
    """The engine digest of commit ``rev`` from git's tree (None where the commit is not in HEAD's history: a
    commit later rebased may still be among a local clone's objects, never among a fresh clone's, and the docs
    must read the same in both)."""
    rev = rev.split("+")[0]
    if not in_history(rev):
        return None
    listing = git("ls-tree", "-r", rev, "--", *ENGINE_FOLDERS)
    if not listing:
        return None
    entries = []
    for line in listing.splitlines():
        info, path = line.split("\t", 1)
        entries.append((path, info.split()[2]))
    return digest_of(entries, scope)


def versions() -> dict:
    """The versions of every library a suite may call, where installed (None where not)."""
    from importlib import metadata

    names = {
        "semiring": "sparse-semirings",
        "numpy": "numpy",
        "scipy": "scipy",
        "numba": "numba",
        "cupy": None,
        "scikit-learn": "scikit-learn",
        "python-graphblas": "python-graphblas",
        "suitesparse-graphblas": "suitesparse-graphblas",
        "networkx": "networkx",
        "dask": "dask",
        "distributed": "distributed",
        "dask-cuda": "dask-cuda",
        "pylibcugraph": None,
    }
    out = {"python": platform.python_version()}
    for name, dist in names.items():
        try:
            out[name] = metadata.version(dist or name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out["cupy"] is None:  # cupy-cuda13x and its kin
        for dist in metadata.distributions():
            if (dist.metadata["Name"] or "").lower().startswith("cupy"):
                out["cupy"] = dist.version
    if out["pylibcugraph"] is None:
        for dist in metadata.distributions():
            if (dist.metadata["Name"] or "").lower().startswith("pylibcugraph"):
                out["pylibcugraph"] = dist.version
    return out


def machine() -> dict:
    """The host (CPU model, cores, load) and the GPUs, where CuPy sees any."""
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = {
        "host": platform.node(),
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "gpus": [],
    }
    try:
        import cupy

        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            out["gpus"].append(
                {"name": props["name"].decode(), "memory_gib": round(props["totalGlobalMem"] / 2**30, 1)}
            )
        out["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        out["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
    except Exception:  # noqa: BLE001, S110 - no CuPy, no driver or no GPU: a host-only machine
        pass
    return out


def check_rows(rows: list[dict]) -> dict:
    """Every check found in the rows (a dict with ``ok`` under any key), counted; the failures listed."""
    passed, failures = 0, []

    def walk(node, where):
        nonlocal passed
        if isinstance(node, dict):
            if isinstance(node.get("ok"), bool) and "against" in node:
                if node["ok"]:
                    passed += 1
                else:
                    failures.append({"where": where, **{k: v for k, v in node.items() if not isinstance(v, dict)}})
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for row in rows:
        label = "/".join(str(row[k]) for k in ("dataset", "graph", "case", "metric", "measure") if k in row)
        walk(row, label)
    return {"passed": passed, "failed": len(failures), "failures": failures}


class Results:
    """One run's results file: ``meta`` written at the start, rows added as they are measured."""

    def __init__(self, suite: str, args, path: Path | None, seed: int | None = None):
        self.path = path
        self.meta = {
            "suite": suite,
            "command": "python -m benchmarks " + shlex.join(sys.argv[1:]),
            "commit": commit(),
            "engine_digest": engine_digest(),
            "engine_digests": engine_digests(),
            "seed": seed if seed is not None else getattr(args, "seed", None),
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "machine": machine(),
            "versions": versions(),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"},
        }
        self.rows: list[dict] = []
        self.extra: dict = {}
        print(json.dumps({"meta": {k: self.meta[k] for k in ("suite", "command", "commit", "seed")}}), flush=True)

    def add(self, row: dict) -> dict:
        """Append a row, print it as one JSON line (the log) and rewrite the file."""
        self.rows.append(row)
        print(json.dumps(row, default=str), flush=True)
        self.save()
        return row

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"meta": self.meta, "rows": self.rows, **self.extra, "checks": check_rows(self.rows)}
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(payload, indent=1, default=str))
        tmp.replace(self.path)

    def finish(self) -> int:
        """Save, print the checks' count; 1 where a check of ours failed (a peer's failure is a result)."""
        self.meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.save()
        checks = check_rows(self.rows)
        ours_failed = [f for f in checks["failures"] if f.get("subject") == "ours"]
        print(
            f"checks: {checks['passed']} passed, {checks['failed']} failed ({len(ours_failed)} of them ours)"
            + (f"; wrote {self.path}" if self.path else ""),
            flush=True,
        )
        return 1 if ours_failed else 0


def load(path: Path) -> dict:
    """A results file, any version of its layout."""
    return json.loads(Path(path).read_text())
