"""The benchmark figures of ``docs/`` made from the results files: ``python -m benchmarks docs`` rewrites every
generated block, ``--check`` only says which differ (``tests/unit/test_docs.py`` fails then).

A generated block in a docs page is the text between ``<!-- figure: NAME -->`` and ``<!-- end figure -->``;
``FIGURES`` below is the index of them (which page, which results files, which table): the one place that says
where a figure comes from.  Each block opens with its source (the file, its commit and command, the machine, the
outcome of its checks); where the engine's code (``semiring/``, ``distances/``, ``kernels/``; of a CPU figure all
but ``kernels/cuda/``, of a GPU figure all but ``kernels/cpu/``: a figure's ``scope``) differs from the code that
ran (``record.engine_digest`` of the file, or of its commit in git), the block says so: **from commit X**.  To show a new run, commit its results file and point its figure here at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from . import peers, record

ROOT = record.ROOT
RESULTS = record.RESULTS
BLOCK = re.compile(r"(<!-- figure: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end figure -->)", re.DOTALL)
PEER_LABELS = {"cusparse": "cuSPARSE", "dense": "dense cuBLAS", "cuvs": "cuVS", "sklearn": "scikit-learn"}
CUVS_ROWS = {"jensenshannon": "l1", "hellinger": "l1", "jaccard": "binary", "dice": "binary", "russellrao": "binary"}


@dataclass(frozen=True)
class Figure:
    name: str
    doc: str  # the page, relative to docs/
    files: tuple[str, ...]  # results files, relative to benchmarks/results/ (a later file's rows replace earlier ones)
    table: str  # the renderer's name in TABLES
    suite: str  # the command that makes such a file again
    scope: str = "all"  # the engine source its figures depend on (record.SCOPES): "cpu", "cuda" or all of it


# --------------------------------------------------------------------------- where each figure comes from

# every measure on the four dataset shapes at 5b72111, in two calls of the lent machine
DISTANCES_GPU = (
    "distances_h200_5b72111_movielens_nytimes.json",
    "distances_h200_5b72111_scrna_edgar.json",
    "distances_h200_1cdcd4c_cuvs_cells.json",
    "distances_h200_fc1e5db_movielens_edgar.json",
    "distances_h200_296b951_movielens_edgar.json",
    "distances_h200_21472d4_cells.json",
    "distances_h200_ce6ae5d_chebyshev.json",
    "distances_h200_a1caf27_edgar.json",
    "distances_h200_09b8814_edgar.json",
    "distances_h200_09b8814_edgar_cells.json",
    "distances_h200_f27fdef_edgar.json",
    "distances_h200_3f7cac3_edgar.json",
    "distances_h200_3f7cac3_edgar_b.json",
    "distances_h200_dc3e141_edgar.json",
    "distances_h200_15c783a_edgar.json",
    "distances_h200_15c783a_edgar_b.json",
)
FIGURES = (
    Figure("distances-gpu", "benchmarks.md", DISTANCES_GPU, "distances", "distances", scope="cuda"),
    Figure("distances-cuvs", "scale.md", DISTANCES_GPU, "distances_cuvs", "distances", scope="cuda"),
    Figure("knn-gpu", "benchmarks.md", ("knn_h200_5b72111.json",), "knn_gpu", "knn", scope="cuda"),
    Figure("knn-host", "neighbors.md", ("knn_h200_5b72111.json",), "knn_host", "knn"),
    Figure(
        "graph-gpu",
        "graph.md",
        (
            "graph_h200_6cef081.json",
            "graph_h200_6cef081_rmat22.json",
            "graph_h200_6cef081_rmat24.json",
            "graph_h200_6cef081_rmat25.json",
            "graph_h200_1efff10_truss_rmat20.json",
            "graph_h200_1efff10_truss_rmat22.json",
            "graph_h200_c6b86bf.json",
            "graph_h200_c6b86bf_rmat22.json",
            "graph_h200_b0c5412.json",
            "graph_h200_b0c5412_rmat24_25.json",
            "graph_h200_6adaf25_cugraph.json",
        ),
        "graph",
        "graph",
        scope="cuda",
    ),
    Figure("cpu-16threads", "cpu-engine.md", ("cpu_16threads_91dea02.json",), "cpu", "cpu", scope="cpu"),
    Figure("cpu-2core", "cpu-engine.md", ("cpu_2core_b8f185d.json",), "cpu", "cpu", scope="cpu"),
    Figure(
        "dask",
        "dask.md",
        (
            "dask_h200x2_5b72111.json",
            "dask_h200x4_ecc1171_knn_1m.json",
            "dask_h200x4_5530cc0_knn_1m.json",
            "dask_h200x4_51a821a_knn_1m.json",
            "dask_h200x4_fa12db8_knn_1m.json",
            "dask_h200x4_1426bec_knn_1m.json",
            "dask_h200x4_4bb65bc_knn_1m.json",
            "dask_h200x4_160e54a_knn_1m.json",
            "dask_h200x4_2da4d02_knn_1m.json",
            "dask_h200x4_d66cb6a_knn_1m.json",
            "dask_h200x2_b7a2a6e_knn_1m.json",
            "dask_h200x2_719276a_rmat24.json",
            "dask_h200x2_526b5bf_rmat24.json",
            "dask_h200x2_ee7218a_rmat24.json",
            "dask_h200x2_c25f638_rmat24.json",
        ),
        "dask",
        "dask",
    ),
    Figure("startup", "cpu-engine.md", ("startup_2core_b8f185d.json",), "startup", "startup"),
    Figure("small-call", "cpu-engine.md", ("small_call_2core_6c80158.json",), "small_call", "small-call", scope="cpu"),
    Figure("union-cpu", "cpu-engine.md", ("cpu_union_2core_b8f185d_knn.json",), "cpu_union", "cpu-union", scope="cpu"),
    Figure("suite-time", "benchmarks.md", ("suite_time_*.json",), "suite_time", "suite-time"),
    Figure(
        "scale",
        "scale.md",
        (
            "scale_h200_eab3ec2_40k_before.json",
            "scale_h200_2af12d4_cosine_cuvs.json",
            "scale_h200_2af12d4_cityblock_cuvs.json",
            "scale_h200_2af12d4_cosine_1m.json",
            "scale_h200_b2eb0b1_all_pairs_off.json",
            "scale_h200_b2eb0b1_all_pairs_on.json",
            "scale_h200_2534f93_40k_cuvs.json",
            "scale_h200_9a6d86d_selection.json",
            "scale_h200_5f59703_1m.json",
        ),
        "scale",
        "scale",
        scope="cuda",
    ),
    Figure(
        "retrieval",
        "scale.md",
        (
            "retrieval_h200_0e47a36_1m_inverted.json",
            "retrieval_h200_0e47a36_1m_auto.json",
            "retrieval_h200_0e47a36_8m_auto.json",
            "retrieval_h200_c77a4c8_1m.json",
            "retrieval_h200_c77a4c8_8m.json",
            "retrieval_h200_4851dfa_8m.json",
            "retrieval_h200_0e0b290_1m.json",
            "retrieval_h200_0e0b290_8m.json",
            "retrieval_h200_2534f93_8m.json",
            "retrieval_h200_9a6d86d_1m.json",
        ),
        "retrieval",
        "retrieval",
        scope="cuda",
    ),
    Figure("index", "benchmarks.md", (), "index", ""),
)


# --------------------------------------------------------------------------- a file's provenance


def meta_of(data: dict) -> dict:
    """commit, command, machine and engine digest of a results file, in any of its layouts' places."""
    meta = data.get("meta", {}) if isinstance(data.get("meta"), dict) else {}
    keys = ("commit", "command", "engine_digest", "engine_digests", "started", "seed")
    out = {key: meta.get(key, data.get(key)) for key in keys}
    machine = meta.get("machine") or data.get("machine") or {}
    gpus = [g["name"] for g in machine.get("gpus", [])] if isinstance(machine, dict) else []
    device = meta.get("device") or data.get("device") or (", ".join(gpus) if gpus else None)
    device = device or (machine.get("gpu") if isinstance(machine, dict) else None)
    if not device and data.get("devices"):
        device = f"{len(data['devices'])} × {data['devices'][0]}"
    cores = machine.get("cpu_count") or machine.get("cpus") or data.get("host_cores") or data.get("cpu_cores")
    out["machine"] = ", ".join(x for x in (device, f"{cores} host cores" if cores else None) if x) or "not recorded"
    if out["commit"]:
        head, plus, rest = out["commit"].partition("+")
        out["commit"] = (head[:7] if len(head) == 40 else head) + plus + rest
    return out


def freshness(meta: dict, path: Path, current: dict[str, str], scope: str = "all") -> str | None:
    """None where the engine code of ``scope`` is the code that ran, else why the figure is from another commit.

    ``current``: today's digest of each scope (``record.SCOPES``).  A scope's digest of the run is the file's
    (``engine_digests``) or its commit's in git; without either, the whole engine's is compared."""
    commit = meta.get("commit")
    if not commit or commit == "unknown":
        added = record.git("log", "--diff-filter=A", "--format=%h", "-1", "--", str(path.relative_to(ROOT)))
        return f"from a commit the file does not record (it was added to the repository in {added or 'no commit'})"
    if "+dirty" in commit:
        return f"from commit {commit}: uncommitted changes ran"
    changed = f"from commit {commit}: the engine code has changed since"
    if scope != "all":
        ran = (meta.get("engine_digests") or {}).get(scope) or record.engine_digest_at(commit, scope)
        if ran is not None:
            return None if ran == current[scope] else changed
    digest = meta.get("engine_digest") or record.engine_digest_at(commit)
    if digest is None:
        return f"from commit {commit}, which this checkout's history does not hold"
    return None if digest == current["all"] else changed


def source_line(fig: Figure, current: dict[str, str]) -> str:
    lines, stale_any = [], False
    for name in fig.files:
        path = RESULTS / name
        data = record.load(path)
        meta = meta_of(data)
        if " dry-run " in (meta["command"] or ""):
            raise ValueError(f"{name}: a dry run without a GPU ({meta['command']}) measures nothing")
        checks = data.get("checks")
        counted = (
            f"; checks: {checks['passed']} passed, {checks['failed']} failed"
            if checks and (checks["passed"] or checks["failed"])
            else ""
        )
        rebased = f" (a helper's commit, rebased onto main as {data['rebased_as']})" if data.get("rebased_as") else ""
        line = (
            f"From `benchmarks/results/{name}`: commit {meta['commit'] or 'not recorded'}{rebased}, {meta['machine']}, "
            f"`{meta['command'] or 'command not recorded'}`{counted}."
        )
        stale = freshness(meta, path, current, fig.scope)
        if stale:
            line += f" **{stale[0].upper() + stale[1:]}.**"
            stale_any = True
        lines.append(line)
    if stale_any:
        lines.append(
            f"The code of today is measured by `python -m benchmarks {fig.suite} ...` (the command in "
            "[Benchmarks](benchmarks.md))."
        )
    return "\n".join(f"{line}\n" for line in lines)


# --------------------------------------------------------------------------- tables


def _rows(fig: Figure, key: str = "rows", keys=("dataset", "metric")) -> list[dict]:
    """The figure's rows, a later file's replacing an earlier one's of the same keys; each row's ``_commit``
    says which run it is from."""
    rows: dict = {}
    for name in fig.files:
        data = record.load(RESULTS / name)
        commit = meta_of(data)["commit"] or "not recorded"
        for r in data.get(key, []):
            rows[tuple(r.get(k) for k in keys) + (r.get("part"),)] = {**r, "_commit": commit}
    return list(rows.values())


def _ok(r: dict, peer: str):
    """A peer's check: True, False, or None where it was not checked (legacy files: agreement with ours)."""
    check = r.get(f"{peer}_check")
    if isinstance(check, dict):
        return check.get("ok")
    return r.get(f"{peer}_agrees")


def _num(x, digits: int = 2) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, (int, float)) else "—"


def _cuvs_cell(r: dict) -> str:
    if "cuvs_ms" not in r:
        return "fails" if "cuvs_error" in r else "—"
    text = _num(r["cuvs_ms"])
    if _ok(r, "cuvs") is False:
        raw = r["metric"] in CUVS_ROWS and "cuvs_rows" not in r
        text += " **wrong on raw rows**" if raw else " **wrong**"
    return text


def _at(r: dict, mixed: bool) -> str:
    """A cell's run, where a figure's rows come from runs of different commits."""
    return f" ({r['_commit']})" if mixed else ""


def _failed_checks(rows: list[dict], mixed: bool) -> list[str]:
    """Each failed check of the rows shown, with what it found: a wrong peer is shown wrong, and why."""
    failed = []
    for r in rows:
        for key, c in r.items():
            if key.endswith("check") and isinstance(c, dict) and c.get("ok") is False:
                failed.append((r, key, c))
    if not failed:
        return []
    oracles = {c.get("against") for _, _, c in failed}
    one = len(oracles) == 1  # then named once, above the list
    out = ["", "Checks that failed (shown **wrong** above, no ratio drawn from them)"]
    out[-1] += f", against {next(iter(oracles))}:" if one else ":"
    out.append("")
    for r, key, c in failed:
        found = [f"{c['wrong_entries']:,} of {c['entries']:,} entries wrong"] if "entries" in c else []
        if c.get("nan_where_number"):
            found.append(f"{c['nan_where_number']:,} NaN where the reference is a number")
        if c.get("number_where_nan"):
            found.append(f"{c['number_where_nan']:,} a number where the reference is NaN")
        if isinstance(c.get("max_rel_err"), float) and c["max_rel_err"] > 0:
            found.append(f"largest relative error {c['max_rel_err']:.3g}")
        against = "" if one else f" (against {c.get('against', 'its oracle')})"
        out.append(
            f"- {c.get('subject', key)}, {r['dataset']} {r['metric']}{_at(r, mixed)}: "
            f"{'; '.join(found) or 'failed'}{against}"
        )
    return out


def table_distances(fig: Figure) -> str:
    rows = _rows(fig)
    mixed = len({r["_commit"] for r in rows}) > 1
    peers = [("merge", "naive merge"), ("cusparse", "cuSPARSE"), ("dense", "dense cuBLAS"), ("cuvs", "cuVS")]
    if any("sklearn_ms" in r for r in rows):
        peers.append(("sklearn", "scikit-learn"))
    out = ["Ours over each peer (the peer's milliseconds over ours; no ratio where the peer is wrong)"]
    out[0] += ", each cell's run in brackets:" if mixed else ":"
    out.append("")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    out.append("| measure | " + " | ".join(datasets) + " |")
    out.append("| --- |" + " ---: |" * len(datasets))
    by = {(r["dataset"], r["metric"]): r for r in rows}
    for metric in sorted({r["metric"] for r in rows}):
        cells = []
        for d in datasets:
            r = by.get((d, metric))
            if r is None:
                cells.append("—")
                continue
            parts = []
            for peer, label in peers:
                ms = r.get(f"{peer}_ms")
                if ms is None:
                    continue
                ratio = f"{ms / r['public_cupy_ms']:.2f}×" if _ok(r, peer) is not False else "wrong"
                parts.append(f"{label} {ratio}")
            cells.append(("; ".join(parts) or "no peer") + _at(r, mixed))
        out.append(f"| {metric} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Every figure (milliseconds, median after a warm-up; extra MiB: device memory beyond inputs and result):",
        "",
    ]
    head = ["dataset", "metric", "ours, CuPy in", "ours, SciPy in", "kernel only", "naive merge", "cuSPARSE"]
    head += ["dense cuBLAS (+ densify)", "cuVS"] + (["scikit-learn"] if "scikit-learn" in dict(peers).values() else [])
    head += ["ours checked", "extra MiB (budget)"] + (["run"] if mixed else [])
    out += ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * (len(head) - 2 - mixed) + " --- |" * mixed]
    for r in rows:

        def cell(peer, r=r):
            if f"{peer}_ms" not in r:
                return "fails" if f"{peer}_error" in r else "—"
            return _num(r[f"{peer}_ms"]) + (" **wrong**" if _ok(r, peer) is False else "")

        dense = cell("dense") + (f" (+ {_num(r['densify_ms'])})" if "densify_ms" in r else "")
        check = r.get("check", {})
        checked = "yes" if check.get("ok") else ("**WRONG**" if check.get("ok") is False else "no oracle")
        over = "" if r["public_extra_mib"] <= r["memory_budget_mib"] else " **over**"
        cells = [
            r["dataset"],
            r["metric"],
            _num(r["public_cupy_ms"]),
            _num(r.get("public_scipy_ms")),
            _num(r.get("kernel_ms")),
        ]
        cells += [cell("merge"), cell("cusparse"), dense, _cuvs_cell(r)]
        cells += [cell("sklearn")] if "scikit-learn" in head else []
        cells += [checked, f"{r['public_extra_mib']:,} ({r['memory_budget_mib']:,}){over}"]
        cells += [r["_commit"]] if mixed else []
        out.append("| " + " | ".join(cells) + " |")
    refused = [
        f"{x['dataset']} {x['metric']}" for name in fig.files for x in record.load(RESULTS / name).get("refused", [])
    ]
    if refused:
        out += [
            "",
            "Refused by our input rules (a constant column: SciPy's default `V` divides by 0): "
            + ", ".join(refused)
            + ".",
        ]
    out += _failed_checks(rows, mixed)
    out += _deviations(fig, rows)
    if any(r["metric"] in CUVS_ROWS and "cuvs_ms" in r and "cuvs_rows" not in r for r in rows):
        out += [
            "",
            "In this run cuVS was given the raw rows for " + ", ".join(CUVS_ROWS) + ": its definitions of those "
            "expect L1-normalised (jensenshannon, hellinger) or binary rows (jaccard, dice, russellrao), so "
            "\"wrong on raw rows\" there is the benchmark's fault, not cuVS's. The `distances` suite now gives it "
            "prepared rows, outside its timing.",
        ]
    return "\n".join(out) + "\n"


def table_distances_cuvs(fig: Figure) -> str:
    """Ours against cuVS alone, measure by dataset: both milliseconds, the ratio where cuVS is right."""
    rows = _rows(fig)
    mixed = len({r["_commit"] for r in rows}) > 1
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    by = {(r["dataset"], r["metric"]): r for r in rows}
    out = [
        "ms at the public call, ours / cuVS, and cuVS's time over ours where cuVS passed its check"
        + (" (each cell's run in brackets)" if mixed else "")
        + "; —: cuVS has no such measure.",
        "",
        "| measure | " + " | ".join(datasets) + " |",
        "| --- |" + " ---: |" * len(datasets),
    ]
    for metric in sorted({r["metric"] for r in rows if "cuvs_ms" in r}):
        cells = []
        for d in datasets:
            r = by.get((d, metric))
            if r is None or "cuvs_ms" not in r:
                cells.append("—" if r is None else f"{_num(r['public_cupy_ms'])} / —{_at(r, mixed)}")
                continue
            ours, cuvs = r["public_cupy_ms"], r["cuvs_ms"]
            verdict = f"**{cuvs / ours:.2f}×**" if _ok(r, "cuvs") is not False else "cuVS **wrong**"
            cells.append(f"{_num(ours)} / {_num(cuvs)}: {verdict}{_at(r, mixed)}")
        out.append(f"| {metric} | " + " | ".join(cells) + " |")
    wrong = [r for r in rows if _ok(r, "cuvs") is False]
    out += _failed_checks(
        [{k: v for k, v in r.items() if k in ("dataset", "metric", "_commit", "cuvs_check")} for r in wrong], mixed
    )
    out += _deviations(fig, rows, peers=("cuvs",))
    return "\n".join(out) + "\n"


def _deviations(fig: Figure, rows: list[dict], peers: tuple[str, ...] | None = None) -> list[str]:
    """What a run of the suites did differently for a peer, stated beside its figure: the rows cuVS was given,
    the peers left out or failing and why, the repeats on each clock (``peers``: only those peers' notes)."""
    notes = []
    runs = [
        (meta_of(d)["commit"], d.get("meta", {}).get("args", {}))
        for d in map(record.load, (RESULTS / n for n in fig.files))
    ]
    clocks = {(a["repeats"], a.get("host_repeats", "?")) for _, a in runs if a.get("repeats")}
    if len(clocks) == 1:
        ((repeats, host_repeats),) = clocks
        host = "ours with SciPy input"
        threads = next((r["sklearn_threads"] for r in rows if "sklearn_threads" in r), None)
        host += f", scikit-learn on {threads} host cores" if threads else ""
        notes.append(
            f"Timing: one warm-up call, then the median of {repeats} (CUDA events) or "
            f"{host_repeats} (wall clock: {host})."
        )
    elif clocks:
        notes.append(
            "Timing: one warm-up call, then the median of "
            + "; ".join(
                f"{a['repeats']} (CUDA events) or {a.get('host_repeats', '?')} (wall clock) at {c}"
                for c, a in runs
                if a.get("repeats")
            )
            + "."
        )
    no_sklearn = [c for c, a in runs if "sklearn_metrics" in a and not a["sklearn_metrics"]]
    if no_sklearn and (peers is None or "sklearn" in peers):
        where = (
            "this file"
            if len(runs) == 1
            else ("these files" if len(no_sklearn) == len(runs) else "the runs at " + ", ".join(no_sklearn))
        )
        notes.append(f"scikit-learn not run in {where} (`--sklearn-metrics=`).")
    prepared = {}
    for r in rows:
        if r.get("cuvs_rows") not in (None, "as given"):
            prepared.setdefault(r["cuvs_rows"], set()).add(r["metric"])
    if prepared:
        how = {"l1": "L1-normalised", "binary": "binary"}
        parts = [f"{how.get(k, k)} rows for {', '.join(sorted(v))}" for k, v in sorted(prepared.items())]
        notes.append("cuVS was given " + "; ".join(parts) + ", as its definitions expect, prepared outside its timing.")
    blocked = {f"{r['dataset']} {r['metric']}": r["cusparse_row_blocks"] for r in rows if r.get("cusparse_row_blocks")}
    if blocked and (peers is None or "cusparse" in peers):
        counts = sorted(set(blocked.values()))
        span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        notes.append(
            f"cuSPARSE was called on row blocks of Q ({span} block{'' if span == '1' else 's'} a product), each of at most "
            "2^29 intermediate products: larger SpGEMMs through CuPy fail or come back as zeros (CuPy issue #10033)."
        )
    left = [a.get("sklearn_skip") for _, a in runs if a.get("sklearn_skip") and a.get("sklearn_metrics")]
    if left and (peers is None or "sklearn" in peers):
        notes.append(f"scikit-learn left out for time (`--sklearn-skip`): {', '.join(sorted(set(left)))}.")
    failures = {}
    for r in rows:
        for key, value in r.items():
            if key.endswith(("_error", "_skipped")) and isinstance(value, str):
                peer = key.rsplit("_", 1)[0]
                if peers is not None and peer not in peers:
                    continue
                label = PEER_LABELS.get(peer, peer)
                failures.setdefault(f"{label}: {value[:100]}", []).append(f"{r['dataset']} {r['metric']}")
    for what, where in sorted(failures.items()):
        notes.append(f"{what} ({', '.join(where[:6])}{' ...' if len(where) > 6 else ''}).")
    return ["", " ".join(notes)] if notes else []


def table_knn_gpu(fig: Figure) -> str:
    rows = [r for r in _rows(fig, "knn") + _rows(fig, "rows") if r.get("part", "all pairs") == "all pairs" and "k" in r]
    out = [
        (
            "| kNN, all rows, k = 10 | ours, CuPy in | ours, SciPy in | cuSPARSE + argpartition "
            "| dense cuBLAS + argpartition | cuVS brute force | extra MiB |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = []
        for peer, key in (
            ("cusparse", "cusparse_argpartition_ms"),
            ("dense", "dense_argpartition_ms"),
            ("cuvs", "cuvs_ms"),
        ):
            if key not in r:
                cells.append("fails" if f"{peer}_error" in r else "—")
                continue
            check = r.get(f"{peer}_check")
            wrong = (
                check.get("ok") is False
                if isinstance(check, dict)
                else r.get(f"{peer}_kth_distance_max_diff", 0) > 1e-3
            )
            cells.append(_num(r[key], 1) + (" **wrong**" if wrong else ""))
        out.append(
            f"| {r['dataset']} {r['metric']} | {_num(r['public_cupy_ms'], 1)} | {_num(r.get('public_scipy_ms'), 1)} "
            f"| {cells[0]} | {cells[1]} | {cells[2]} | {_num(r.get('public_extra_mib'), 1)} |"
        )
    return "\n".join(out) + "\n"


def table_knn_host(fig: Figure) -> str:
    rows = _rows(fig)
    out = []
    if rows and "gpu_all_s" in rows[0]:  # knn_bench.py's layout
        out += [
            (
                "| dataset | metric | ours GPU, all rows | ours GPU, subset | ours CPU, subset | scikit-learn, subset "
                "| peak GPU MiB (working_memory + in + out) | same as scikit-learn (subset) |"
            ),
            "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for r in rows:
            mem = "; ".join(
                f"{e['peak_gpu_mib']:.0f} ≤ {e['working_memory_mib']:.0f} + {r['inputs_mib']:.0f} + {r['outputs_mib']:.0f}"
                + ("" if e["within"] else " **exceeded**")
                for e in r["memory"]
            )
            agree = r["gpu_vs_sklearn"]
            same = f"{agree['identical_indices']:.4f} identical; " + (
                "up to ties" if agree["equal_up_to_ties"] else "**differs**"
            )
            out.append(
                f"| {r['dataset']} {r['shape'][0]:,} × {r['shape'][1]:,} | {r['metric']} | {r['gpu_all_s'] * 1e3:,.0f} ms "
                f"| {r['gpu_subset_s'] * 1e3:,.1f} ms | {r['cpu_subset_s'] * 1e3:,.0f} ms "
                f"| {r['sklearn_subset_s'] * 1e3:,.0f} ms | {mem} | {same} |"
            )
        out += [
            "",
            (
                f"Subset: the first {rows[0]['subset_queries']:,} rows as queries. In this run scikit-learn and our CPU "
                "engine were timed once, cold (no warm-up), against our GPU's median after a warm-up; the `knn` suite "
                "now warms every side up alike."
            ),
        ]
        return "\n".join(out) + "\n"
    out += [
        "| dataset | metric | queries | ours GPU (host in and out) | ours CPU | scikit-learn | threads | all checked |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in (r for r in rows if r.get("part") == "subset"):
        checks = [r.get(k, {}).get("ok") for k in ("ours_cuda_check", "ours_cpu_check", "sklearn_check")]
        out.append(
            f"| {r['dataset']} | {r['metric']} | {r['queries']:,} | {_num(r.get('ours_cuda_ms'), 1)} "
            f"| {_num(r.get('ours_cpu_ms'), 1)} | {_num(r.get('sklearn_ms'), 1)} | {r['threads']} "
            f"| {'yes' if all(checks) else '**no**'} |"
        )
    return "\n".join(out) + "\n"


def _graph_rows(fig: Figure) -> list[dict]:
    """Every file's graphs, one row a graph: a later file's timings, checks and peer errors of a graph join an
    earlier file's, replacing those of the same name (a run of some measures adds them to the graph's row); a
    peer skipped by the later run keeps the earlier one's timings, and a peer not installed on the later run's
    machine everything the earlier ones said of it."""
    rows: dict = {}
    for name in fig.files:
        for r in record.load(RESULTS / name).get("rows", []):
            row = rows.setdefault(r["graph"], {})
            earlier = bool(row)  # an earlier file has this graph
            for k, v in r.items():
                peer = k.removesuffix(" skipped")
                if peer != k and any(t.startswith(peer) for t in row.get("timings", {})):
                    continue  # skipped here, timed by an earlier file
                if k.endswith((" skipped", " error")) and _not_installed(v) and earlier:
                    continue  # the peer was not on this run's machine: not a result of it
                if isinstance(v, dict) and isinstance(row.get(k), dict):
                    row[k] = {**row[k], **v}
                elif v is not None or k not in row:
                    row[k] = v
    return list(rows.values())


def _not_installed(message) -> bool:
    return isinstance(message, str) and ("ModuleNotFoundError" in message or "not installed" in message)


def table_graph(fig: Figure) -> str:
    data = record.load(RESULTS / fig.files[-1])
    out = []
    if "results" in data:  # graph_bench.py's layout
        out += [
            (
                "| scale | vertices | edges | triangles | ours TC (degree / id order) | ours Jaccard | ours CN "
                "| cuSPARSE (L·L)∘L | cuSPARSE (A·A)∘A | graphblas TC | graphblas CN / Jaccard |"
            ),
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |",
        ]

        def peer(p):
            if "error" in p:
                return f"fails: {p['error'][:50]}"
            return f"{p['ms']:.1f} ms" + ("" if p.get("correct") else f", **wrong**: {p['returned']:,.0f} triangles")

        for r in data["results"]:
            o, p = r["ours"], r["peers"]
            g = p["python-graphblas"]
            gtc, gcn = g.get("triangles", {}), g.get("common_neighbors", {})
            gtc_text = f"{gtc['ms']:,.0f}" if "ms" in gtc else f"cut off after {gtc.get('ms_at_least', 0) / 1e3:.0f} s"
            gcn_text = f"{gcn['ms']:,.0f} / {gcn['jaccard_ms']:,.0f}" if "ms" in gcn else gcn.get("error", "—")[:40]
            out.append(
                f"| {r['scale']} | {r['vertices']:,} | {r['edges']:,} | {r['triangles']:,} "
                f"| {o['triangles']['ms']:.2f} / {o['triangles_id_order']['ms']:.2f} | {o['jaccard']['ms']:.2f} "
                f"| {o['common_neighbors']['ms']:.2f} | {peer(p['cusparse (L·L)∘L triangles'])} "
                f"| {peer(p['cusparse (A·A)∘A triangles / common neighbours'])} | {gtc_text} | {gcn_text} |"
            )
        out += [
            "",
            (
                "Milliseconds. In this run python-graphblas was timed once, cold, and its Jaccard checked through its "
                "sum only; the `graph` suite now warms it up, takes the median and checks every side at sampled edges."
            ),
        ]
        return "\n".join(out) + "\n"
    out += [
        "| graph | vertices | edges | triangles | implementation | measure | ms (median) | checked |",
        "| --- | ---: | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for r in _graph_rows(fig):
        for label, t in r["timings"].items():
            who, _, what = label.partition(" ")
            checks = [
                c for k, c in r["checks"].items() if k.startswith(label.split(" ")[0]) and what.split("_")[0] in k
            ]
            ok = "—" if not checks else ("yes" if all(c.get("ok") for c in checks) else "**wrong**")
            out.append(
                f"| {r['graph']} | {r['vertices']:,} | {r['edges']:,} | {r['triangles']:,} | {who} | {what} "
                f"| {t['median_ms']:,.2f} | {ok} |"
            )
        errors = {k: v for k, v in r.items() if k.endswith(("error", "skipped"))}
        for k, v in errors.items():
            who, what = k.rsplit(" ", 1)
            cut = r.get(f"{who} cut off")  # a peer cut off: the calls it finished too, in the words of today
            text = peers.cut_off_text(cut) if cut else str(v)[:60]
            out.append(f"| {r['graph']} | | | | {who} | | {what} | {text} |")
    return "\n".join(out) + "\n"


def _share(timing: dict) -> str:
    share = timing.get("others_cpu")
    return "—" if share is None else f"{100 * share:.0f} %"


def table_cpu(fig: Figure) -> str:
    data = record.load(RESULTS / fig.files[-1])
    rows = data.get("results") or data.get("rows")
    meta = data.get("meta", {})
    threads = (data.get("machine") or {}).get("threads") or meta.get("threads")
    legacy = "check" in rows[0]
    shared = not legacy and any("others_cpu" in r["ours"] or "others_cpu" in r["peer_timing"] for r in rows)
    head = "| dataset | measure | peer | ours ms | peer ms | speed-up | checked |"
    out = [
        head + (" others' CPU share, ours / peer |" if shared else ""),
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    out[-1] += " ---: |" if shared else ""
    for r in rows:
        o = r["ours"].get("median_ms", r["ours"].get("best_ms"))
        p = r["peer_timing"].get("median_ms", r["peer_timing"].get("best_ms"))
        if legacy:
            status = r["check"]["status"]
            checked = {"CORRECT": "agree", "PEER TIMED OUT": "peer cut off"}.get(status, status.lower())
        else:
            ours_ok = r["checks"]["ours"].get("ok")
            peer_ok = r["checks"].get("peer", {}).get("ok", True)
            checked = "yes" if ours_ok and peer_ok else ("ours **WRONG**" if ours_ok is False else "")
            checked = checked or ("peer **wrong**" if peer_ok is False else "unchecked")
            checked += " (peer cut off)" if r["peer_timing"].get("cut_off") else ""
        line = f"| {r['dataset']} | {r['measure']} | {r['peer']} | {o:,.1f} | {p:,.1f} | {p / o:.2f}× | {checked} |"
        out.append(line + (f" {_share(r['ours'])} / {_share(r['peer_timing'])} |" if shared else ""))
    out += [""]
    if legacy:
        out.append(
            f"{threads} threads on every side; the best of the repeats after a warm-up. In this run each result of "
            "ours was checked against the peer's (arbitrated in float64 where they differed), not against an "
            "independent oracle; the `cpu` suite now checks both sides against SciPy in float64 and takes the median."
        )
        return "\n".join(out) + "\n"
    note = f"{threads} threads on every side; the median of the repeats after a warm-up"
    once = sorted({f"{r['dataset']} {r['measure']}" for r in rows if r["peer_timing"].get("note")})
    note += f" (networkx, single-threaded and slow, one call with no warm-up: {', '.join(once)})." if once else "."
    out.append(note)
    if shared:
        out += [
            "",
            "Others' CPU share: the share of all the machine's cores other processes used while a side was timed "
            "(—: a window too short to tell); "
            + (f"{100 * meta['others_cpu']:.0f} % over the whole run. " if meta.get("others_cpu") is not None else "")
            + "Where it is far from 0 the machine was shared, and the figures are those of a contended machine, "
            "not of an idle one.",
        ]
    return "\n".join(out) + "\n"


def table_dask(fig: Figure) -> str:
    out = ["| case | GPUs | Dask | seconds | matches one GPU | commit |", "| --- | ---: | --- | ---: | --- | --- |"]
    for name in fig.files:
        data = record.load(RESULTS / name)
        for r in data["results"]:
            match = "—" if "matches_single_gpu" not in r else ("yes" if r["matches_single_gpu"] else "**no**")
            dask = "yes" if r["dask"] else "no"
            out.append(f"| {r['case']} | {r['gpus']} | {dask} | {r['seconds']:.3f} | {match} | {data['commit']} |")
    return "\n".join(out) + "\n"


def table_startup(fig: Figure) -> str:
    data = record.load(RESULTS / fig.files[-1])
    out = ["| probe | warm (median) | cold (first process) |", "| --- | ---: | ---: |"]
    for name, r in data["results"].items():
        w, c = r["warm_median"], r["cold"]
        if name == "numba floor":
            out.append(
                f"| numba floor (import + first call of a cached kernel) | {w['numba_import_s'] + w['first_call_s']:.3f} s | — |"
            )
        elif name == "import semiring":
            out.append(f"| import semiring | {w['import_s']:.3f} s | {c['import_s']:.3f} s |")
        elif name == "semiring knn":
            out.append(f"| `semiring knn` (whole process) | {w['wall_s']:.2f} s | {c['wall_s']:.2f} s |")
        else:
            out.append(f"| first call, {name} | {w['first_call_s']:.3f} s | {c['first_call_s']:.2f} s |")
    return "\n".join(out) + "\n"


def table_suite_time(fig: Figure) -> str:
    rows = _rows(fig, keys=("case",))
    out = ["| where | tests | wall time | pytest's summary |", "| --- | --- | ---: | --- |"]
    for r in rows:
        counts = ", ".join(f"{n:,} {k}" for k, n in r["counts"].items())
        wall = f"{r['wall_seconds']:,.1f} s" if r.get("wall_seconds") else "—"
        failing = "; failing: " + ", ".join(f"`{t}`" for t in r["failing"]) if r.get("failing") else ""
        if r["counts"].get("failed") or r["counts"].get("error"):
            failing = failing or "; which tests failed was not recorded"
        out.append(f"| {r['case']} | {counts} | {wall} | {r['summary']}{failing} |")
    return "\n".join(out) + "\n"


def table_small_call(fig: Figure) -> str:
    data = record.load(RESULTS / fig.files[-1])
    threads = data.get("threads")
    sides = (
        ("ours", "ours"),
        ("ours_all_threads", f"ours, every thread woken (the small-call rule off; {threads} threads)"),
        ("sklearn_n_jobs_none", "scikit-learn, `n_jobs=None` (one thread)"),
        ("sklearn", f"scikit-learn, `n_jobs={threads}`"),
    )
    out = ["| side | best | median |", "| --- | ---: | ---: |"]
    for key, label in sides:
        if key in data:
            out.append(f"| {label} | {data[key]['best_ms']:.2f} ms | {data[key]['median_ms']:.2f} ms |")
    ours, peer = data["ours"], data["sklearn_n_jobs_none"]
    shape = f"{data['shape'][0]:,} × {data['shape'][1]:,}, {data['nnz']:,} stored entries"
    ratios = f"{peer['best_ms'] / ours['best_ms']:.2f}× best, {peer['median_ms'] / ours['median_ms']:.2f}× median"
    diff = f"largest difference of the answers {data['max_abs_diff']:.1e}"
    out += ["", f"Ours against scikit-learn's one thread: {ratios}; {diff}; {shape}."]
    return "\n".join(out) + "\n"


def table_cpu_union(fig: Figure) -> str:
    data = record.load(RESULTS / fig.files[-1])
    rows = data["results"]
    out = []
    cheb = [r for r in rows if r.get("measure") == "chebyshev"]
    if cheb:
        out += [
            "| dataset | extremum ms | merge ms | scatter ms | cityblock ms | chebyshev / cityblock | checked |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in cheb:
            ok = "yes" if r["agree_with_scipy"] else "**no**"
            out.append(
                f"| {r['dataset']} | {r['extremum']:,.0f} | {r['merge']:,.0f} | {r['scatter']:,.0f} "
                f"| {r['cityblock_auto']:,.0f} | {r['ratio_to_cityblock']:.2f} ({r['auto']}) | {ok} |"
            )
    knn = [r for r in rows if r.get("measure") == "knn all rows"]
    if knn:
        out += ["", "| dataset | rows × cols | chebyshev kNN ms | cityblock kNN ms | chebyshev / cityblock | checked |"]
        out.append("| --- | --- | ---: | ---: | ---: | --- |")
        for r in knn:
            ok = "yes" if r["agree_with_scipy"] else "**no**"
            shape = f"{r['shape'][0]:,} × {r['shape'][1]:,}"
            out.append(
                f"| {r['dataset']} | {shape} | {r['chebyshev_ms']:,.0f} | {r['cityblock_ms']:,.0f} "
                f"| {r['ratio_to_cityblock']:.2f} | {ok} (k = {r['k']}) |"
            )
    return "\n".join(out).lstrip("\n") + "\n"


def table_index(fig: Figure) -> str:
    out = ["| figure | page | results files | made again by |", "| --- | --- | --- | --- |"]
    for f in FIGURES:
        if f.name == "index":
            continue
        files = ", ".join(f"`{name}`" for name in f.files)
        out.append(f"| {f.name} | [{f.doc}]({f.doc}) | {files} | `python -m benchmarks {f.suite}` |")
    return "\n".join(out) + "\n"


def table_scale(fig: Figure) -> str:
    from . import scale

    return scale.report([str(RESULTS / name) for name in fig.files])


def table_retrieval(fig: Figure) -> str:
    from . import retrieval

    return retrieval.report([str(RESULTS / name) for name in fig.files])


TABLES = {
    "distances": table_distances,
    "distances_cuvs": table_distances_cuvs,
    "knn_gpu": table_knn_gpu,
    "knn_host": table_knn_host,
    "graph": table_graph,
    "cpu": table_cpu,
    "dask": table_dask,
    "startup": table_startup,
    "suite_time": table_suite_time,
    "scale": table_scale,
    "retrieval": table_retrieval,
    "small_call": table_small_call,
    "cpu_union": table_cpu_union,
    "index": table_index,
}


# --------------------------------------------------------------------------- the pages


def expand(fig: Figure) -> Figure:
    """The figure with its file patterns (``suite_time_*.json``) replaced by the files they match, oldest commit
    first: a later file's rows replace an earlier one's, so the newest run of a case is the one shown (by name,
    ``a50dd0e`` would sort before ``ca26ebb``)."""
    files = []
    for name in fig.files:
        files += sorted((p.name for p in RESULTS.glob(name)), key=_age) if any(c in name for c in "*?[") else [name]
    return replace(fig, files=tuple(files))


def _age(name: str) -> tuple[int, str]:
    """A results file's place in HEAD's history: its commit's count of ancestors (-1 where the commit is not
    in HEAD's history or not recorded), then its name."""
    commit = (meta_of(record.load(RESULTS / name))["commit"] or "").split("+")[0]
    count = record.git("rev-list", "--count", commit) if commit and record.in_history(commit) else ""
    return (int(count) if count else -1, name)


def render(fig: Figure, current: dict[str, str]) -> str:
    pattern = fig.files
    fig = expand(fig)
    missing = [name for name in fig.files if not (RESULTS / name).is_file()]
    if missing or (pattern and not fig.files):
        name = missing[0] if missing else pattern[0]
        return f"No results file yet (`benchmarks/results/{name}`): `python -m benchmarks {fig.suite}` makes it.\n"
    head = source_line(fig, current) if fig.files else ""
    return (head + "\n" if head else "") + TABLES[fig.table](fig)


def pages(docs: Path = ROOT / "docs") -> dict[Path, tuple[str, str]]:
    """Each page holding a figure: (its text now, its text with every figure made from the results files)."""
    current = {scope: record.engine_digest(scope=scope) for scope in record.SCOPES}
    figures = {f.name: f for f in FIGURES}
    out = {}
    for doc in sorted({f.doc for f in FIGURES}):
        path = docs / doc
        text = path.read_text()

        def fill(m, path=path):
            fig = figures.get(m.group("name"))
            if fig is None:
                raise ValueError(f"{path}: figure {m.group('name')!r} is not in benchmarks/docs.py FIGURES")
            return m.group(1) + render(fig, current) + m.group(4)

        out[path] = (text, BLOCK.sub(fill, text))
    for fig in FIGURES:
        if f"<!-- figure: {fig.name} -->" not in (docs / fig.doc).read_text():
            raise ValueError(f"docs/{fig.doc} has no block for figure {fig.name!r} (<!-- figure: {fig.name} -->)")
    return out


def add_arguments(p) -> None:
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 where a page differs")
    p.add_argument("--unreferenced", action="store_true", help="list the results files nothing refers to, and stop")


def main(args) -> int:
    if args.unreferenced:
        for name in unreferenced():  # one a line; nothing at all where every file is referred to
            print(name)
        return 0
    stale = []
    for path, (now, made) in pages().items():
        if now != made:
            stale.append(path)
            if not args.check:
                path.write_text(made)
    for path in stale:
        print(f"{path.relative_to(ROOT)}: {'differs from' if args.check else 'made again from'} the results files")
    return 1 if (stale and args.check) else 0


# --------------------------------------------------------------------------- results files nothing refers to


def _referring_text() -> str:
    """Every text that may name a results file: the docs, README, the code and the tests, brace lists
    (``run{1,2}``) spelled out."""
    parts = [(ROOT / "README.md").read_text()]
    for folder, pattern in (("docs", "*.md"), ("benchmarks", "*.py"), ("benchmarks", "*.md"), ("tests", "*.py")):
        parts += [p.read_text() for p in sorted((ROOT / folder).rglob(pattern)) if "results" not in p.parts]
    for folder in record.ENGINE_FOLDERS:
        parts += [p.read_text() for p in sorted((ROOT / folder).rglob("*.py"))]
    text = "\n".join(parts)
    brace = re.compile(r"([\w.-]*)\{([\w.,-]+)\}([\w.{},-]*)")
    for _ in range(3):  # nested and repeated lists
        text += "\n" + "\n".join(
            m.group(1) + alt + m.group(3) for m in brace.finditer(text) for alt in m.group(2).split(",")
        )
    return text


def unreferenced() -> list[str]:
    """Results files that no text names: by name, by a pattern (``stage_profile_h200_*.json``), by a suffix of
    a file named beside it (`` `_c.json` ``), or as the log or table of a run whose results file is named."""
    import fnmatch

    text = _referring_text()
    names = sorted(p.name for p in RESULTS.iterdir() if p.is_file())
    tokens = {t.lstrip(".") for t in re.findall(r"[\w.*{},+-]+\.(?:json|log|md|csv)", text)}  # "..._after1.json"
    named = {n for n in names if n in text}
    patterns = [t for t in tokens if "*" in t and len(t.split("*")[0]) >= 4]  # a family's name, not any file
    named |= {n for n in names for t in patterns if fnmatch.fnmatch(n, t)}
    named |= {n for n in names for t in tokens if t.startswith("_") and n.endswith(t)}
    for f in FIGURES:
        named |= set(expand(f).files)
    stems = {n.rsplit(".", 1)[0] for n in named}
    named |= {n for n in names if n.rsplit(".", 1)[0] in stems}  # a named run's log, table or JSON beside it
    return [n for n in names if n not in named]
