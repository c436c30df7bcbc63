"""Suite ``suite-time``: the test suite's counts (passed, failed, skipped, ...) and wall time, in a results file.

Either runs ``python -m pytest`` itself (its further options after ``--``) and times it, or records a run
someone else timed (``--log FILE --seconds S``: what ``.ci/run`` does after CI's own pytest run, so that the
docs quote CI's counts from a file and CI takes no longer).  The file holds the commit, the command, the
machine, the versions, pytest's summary line and the counts parsed from it.

    python -m benchmarks suite-time --json benchmarks/results/suite_time_2core.json -- -q
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from .record import RESULTS, Results

SUMMARY = re.compile(r"=+ (?P<body>.*?(passed|failed|error|skipped|xfailed|xpassed|deselected).*?) in (?P<s>[\d.]+)s")
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


def add_arguments(p) -> None:
    p.add_argument("--log", type=Path, help="a pytest run's output to record instead of running one")
    p.add_argument("--seconds", type=float, help="with --log: the run's wall time, as measured by its runner")
    p.add_argument("--label", default="", help="where it ran (ci, a machine's name)")
    p.add_argument("--json", type=Path, default=RESULTS / "suite_time.json")
    p.add_argument("pytest_args", nargs="*", help="after --: options for pytest")


def parse(text: str) -> dict:
    """pytest's last summary line and its counts."""
    matches = list(SUMMARY.finditer(text))
    if not matches:
        return {"summary": None, "counts": {}}
    last = matches[-1]
    counts = {}
    for number, kind in COUNT.findall(last.group("body")):
        counts[kind.rstrip("s") if kind in ("errors", "warnings") else kind] = int(number)
    failing = [line.split(" - ")[0] for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    return {
        "summary": last.group(0).strip("= "),
        "counts": counts,
        "pytest_seconds": float(last.group("s")),
        "failing": sorted(set(failing)),
    }


def main(args) -> int:
    results = Results("suite-time", args, args.json)
    if args.log:
        text = args.log.read_text(errors="replace")
        seconds = args.seconds
        results.meta["command"] = "python -m pytest (recorded from its log by " + results.meta["command"] + ")"
    else:
        cmd = [sys.executable, "-m", "pytest", *args.pytest_args]
        start = time.perf_counter()
        lines = []
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
            for line in proc.stdout:  # pytest's output as it comes (the log), kept for the summary
                print(line, end="", flush=True)
                lines.append(line)
        seconds = time.perf_counter() - start
        text = "".join(lines)
        results.meta["pytest_command"] = " ".join(["python -m pytest", *args.pytest_args])
    row = {"case": args.label or "suite", **parse(text), "wall_seconds": None if seconds is None else round(seconds, 1)}
    results.add(row)
    results.finish()
    return 0
