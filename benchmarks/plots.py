"""PNG plots of the benchmark results in ``benchmarks/results/`` for the docs.

    python -m benchmarks plots            # writes docs/img/<result name>.png

One plot per result file that exists: ``cpu_engine_*.json``
(``benchmarks/cpu_engine.py``), ``gpu_bench_*.json`` (``benchmarks/gpu_bench.py``),
``knn_bench*.json`` and ``graph_bench*.json``.  Missing files are skipped and
named.  Times are on a log axis; a peer whose result disagreed with ours is
drawn hatched and labelled "wrong", one that failed is labelled with its error.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
COLORS = {"ours": "#1f77b4", "peer": "#ff7f0e", "third": "#2ca02c", "fourth": "#9467bd"}

# The docs show a figure about 750-900 px wide (the text column at a 1,280 px window): figures are drawn
# WIDTH inches wide at DPI, so that text of FONT points stays about 12 px tall or more on the page.
WIDTH, DPI, FONT = 8.0, 110, 11
plt.rcParams.update(
    {
        "font.size": FONT,
        "axes.titlesize": FONT + 1,
        "axes.labelsize": FONT,
        "xtick.labelsize": FONT - 1,
        "ytick.labelsize": FONT - 1,
        "legend.fontsize": FONT - 1,
        "figure.titlesize": FONT + 2,
    }
)
NOTE_FONT = FONT - 2  # "wrong" / "failed" on a bar


def grouped_bars(ax, groups: list[str], series: dict[str, list], colors: list[str], notes=None, tilt=45) -> None:
    """Bars of times (ms) per group, one bar per series; None leaves a gap; notes[(s, g)] writes text on a bar.

    A note "wrong" also hatches its bar; a note on a gap sits at the bottom of the axis.
    """
    notes = notes or {}
    width = 0.8 / len(series)
    x = np.arange(len(groups))
    placed = []
    for s, (name, values) in enumerate(series.items()):
        offset = x - 0.4 + width * (s + 0.5)
        heights = np.array([v if v else np.nan for v in values], dtype=float)
        bars = ax.bar(offset, heights, width, label=name, color=colors[s % len(colors)])
        for g, (bar, group) in enumerate(zip(bars, groups)):
            note = notes.get((name, group))
            if note == "wrong":
                bar.set_hatch("//")
            if note:
                placed.append((offset[g], heights[g], note))
    ax.set_yscale("log")
    if placed:  # room above the tallest bar for a note written upwards from its top
        ax.set_ylim(top=ax.get_ylim()[1] * 12)
    bottom = ax.get_ylim()[0]
    for x_at, height, note in placed:  # after every bar, so that the axis' bottom is final
        ax.text(
            x_at,
            height if np.isfinite(height) else bottom,
            note,
            rotation=90,
            ha="center",
            va="bottom",
            fontsize=NOTE_FONT,
        )
    ax.set_xticks(x, groups, rotation=tilt, ha="right" if tilt else "center")
    ax.set_xlim(-0.5, len(groups) - 0.5)  # gaps (failed peers) at the ends stay inside, with their notes
    ax.set_ylabel("time (ms, log scale)")
    ax.set_axisbelow(True)
    ax.grid(axis="y", which="major", alpha=0.4)


def plot_cpu_engine(result: dict, title: str):
    """Ours against scikit-learn and python-graphblas, best time per dataset and measure."""
    datasets = list(dict.fromkeys(r["dataset"] for r in result["results"]))
    ncols = min(2, len(datasets))
    nrows = -(-len(datasets) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, 3.6 * nrows + 1), sharey=True, squeeze=False)
    for ax in axes.flat[len(datasets) :]:
        ax.set_visible(False)
    for ax, dataset in zip(axes.flat, datasets):
        rows = [r for r in result["results"] if r["dataset"] == dataset]
        groups = [r["measure"] for r in rows]
        peers = [r["peer"] for r in rows]
        series = {
            "ours (CPU engine)": [r["ours"]["best_ms"] for r in rows],
            "peer (scikit-learn, python-graphblas)": [r["peer_timing"]["best_ms"] for r in rows],
        }
        grouped_bars(ax, [f"{g}\nvs {p}" for g, p in zip(groups, peers)], series, [COLORS["ours"], COLORS["peer"]])
        ax.set_title(dataset)
    for row in axes[:, 1:]:
        for ax in row:
            ax.set_ylabel("")  # shared: said once per row
    _legend(fig, axes[0, 0])
    machine = result["machine"]
    args = result["args"]
    fig.suptitle(
        f"{title}\n{args['queries']} queries against every row, {machine['threads']} threads ({machine['cpu_model']})"
    )
    return fig


def plot_gpu_bench(result: dict, title: str):
    """Ours on the GPU against the naive merge kernel, cuSPARSE, dense cuBLAS and scikit-learn."""
    rows = result["rows"]
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    peers = {
        "ours (GPU)": ("ours_ms", None),
        "naive merge (GPU)": ("naive_ms", "naive_agrees"),
        "cuSPARSE + densify (GPU)": ("cusparse_ms", "cusparse_agrees"),
        "dense cuBLAS (GPU)": ("dense_ms", "dense_agrees"),
        "scikit-learn (CPU)": ("sklearn_ms_all_queries", "sklearn_agrees"),
    }
    colors = [COLORS["ours"], "#7f7f7f", COLORS["peer"], COLORS["third"], COLORS["fourth"]]
    present = {name: spec for name, spec in peers.items() if any(spec[0] in r or _failed(name, r) for r in rows)}
    fig, axes = plt.subplots(len(datasets), 1, figsize=(WIDTH, 2.9 * len(datasets) + 1.2), squeeze=False)
    for ax, dataset in zip(axes[:, 0], datasets):
        here = [r for r in rows if r["dataset"] == dataset]
        groups = [r["metric"] for r in here]
        series, notes = {}, {}
        for name, (key, agrees) in present.items():
            series[name] = [r.get(key) for r in here]
            for r in here:
                if agrees and r.get(agrees) is False:
                    notes[(name, r["metric"])] = "wrong"
                if _failed(name, r):
                    notes[(name, r["metric"])] = "failed"
        grouped_bars(ax, groups, series, [colors[list(peers).index(n)] for n in series], notes, tilt=30)
        ax.set_title(dataset)
    _legend(fig, axes[0, 0], ncol=3)
    fig.suptitle(f"{title}\nquery rows against every row, float32")
    return fig


def _failed(name: str, row: dict) -> bool:
    return name.startswith("cuSPARSE") and "cusparse_error" in row


def _legend(fig, ax, ncol: int | None = None) -> None:
    """One legend for every panel, below them all: outside the data."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=ncol or len(labels), bbox_to_anchor=(0.5, 0.0), frameon=False)


def plot_knn_bench(result: dict, title: str):
    """kNN, every row against every row: ours on the GPU and the CPU against scikit-learn's brute force."""
    rows, meta = result["rows"], result.get("meta", {})
    groups = [f"{r['dataset']}\n{r['metric']}" for r in rows]
    series = {
        "ours GPU, all rows": [r["gpu_all_s"] * 1e3 for r in rows],
        "ours GPU, subset": [r["gpu_subset_s"] * 1e3 for r in rows],
        "ours CPU, subset": [r["cpu_subset_s"] * 1e3 for r in rows],
        "scikit-learn, subset": [r["sklearn_subset_s"] * 1e3 for r in rows],
    }
    notes = {}
    for group, r in zip(groups, rows):
        for engine, name in (("gpu", "ours GPU, subset"), ("cpu", "ours CPU, subset")):
            if not r[f"{engine}_vs_sklearn"]["equal_up_to_ties"]:
                notes[(name, group)] = "wrong"
    fig, ax = plt.subplots(figsize=(WIDTH, 5.2))
    colors = [COLORS["ours"], "#aec7e8", COLORS["third"], COLORS["peer"]]
    grouped_bars(ax, groups, series, colors, notes, tilt=30)
    _legend(fig, ax, ncol=2)
    subset = rows[0]["subset_queries"] if rows else 0
    fig.suptitle(
        f"{title}\nthe k = {meta.get('k', '?')} nearest of every row ({meta.get('device', 'GPU')}); "
        f"subset: the first {subset:,} rows as queries"
    )
    return fig


def plot_graph_bench(result: dict, title: str):
    """Triangle counts and per-edge measures on R-MAT graphs: ours on the GPU, cuSPARSE, python-graphblas."""
    rows = result["results"]
    groups = [f"scale {r['scale']}\n{r['vertices'] / 1e6:.2g} M vertices\n{r['edges'] / 1e6:.3g} M edges" for r in rows]
    fig, (tc, edge) = plt.subplots(2, 1, figsize=(WIDTH, 10.5))
    notes = {}

    def peer(name, group, record, key="ms"):
        """A peer's time; its failure, wrong answer or time limit becomes a note."""
        if "ms_at_least" in record:  # stopped at the time limit: at least this long
            notes[(name, group)] = "cut off"
            return record["ms_at_least"]
        if "error" in record:
            notes[(name, group)] = "failed"
        elif record.get("correct") is False:
            notes[(name, group)] = "wrong"
        return record.get(key)

    triangles = {"ours (degree order)": [], "ours (id order)": [], "cuSPARSE (L·L)∘L": [], "cuSPARSE (A·A)∘A": []}
    triangles["python-graphblas"] = []
    per_edge = {"ours Jaccard": [], "ours common neighbours": [], "graphblas Jaccard": []}
    per_edge["graphblas common neighbours"] = []
    for group, r in zip(groups, rows):
        o, p = r["ours"], r["peers"]
        g = p["python-graphblas"]
        triangles["ours (degree order)"].append(o["triangles"]["ms"])
        triangles["ours (id order)"].append(o["triangles_id_order"]["ms"])
        triangles["cuSPARSE (L·L)∘L"].append(peer("cuSPARSE (L·L)∘L", group, p["cusparse (L·L)∘L triangles"]))
        both = p["cusparse (A·A)∘A triangles / common neighbours"]
        triangles["cuSPARSE (A·A)∘A"].append(peer("cuSPARSE (A·A)∘A", group, both))
        triangles["python-graphblas"].append(peer("python-graphblas", group, g.get("triangles", {"error": "none"})))
        cn = g.get("common_neighbors", {"error": "none"})
        per_edge["ours Jaccard"].append(o["jaccard"]["ms"])
        per_edge["ours common neighbours"].append(o["common_neighbors"]["ms"])
        per_edge["graphblas Jaccard"].append(peer("graphblas Jaccard", group, cn, "jaccard_ms"))
        per_edge["graphblas common neighbours"].append(peer("graphblas common neighbours", group, cn))
    colors = [COLORS["ours"], "#aec7e8", COLORS["peer"], "#ffbb78", COLORS["third"]]
    grouped_bars(tc, groups, triangles, colors, notes, tilt=0)
    tc.set_title("triangle count")
    grouped_bars(edge, groups, per_edge, [COLORS["ours"], "#aec7e8", COLORS["third"], "#98df8a"], notes, tilt=0)
    edge.set_title("Jaccard and common neighbours at every edge")
    for ax in (tc, edge):  # below the axes, clear of the bars
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    fig.suptitle(
        f"{title}\nGraph500 R-MAT graphs; GPU: {result.get('device', '?')}; "
        f"python-graphblas on {result.get('cpu_cores', '?')} CPU cores"
    )
    return fig


# (result files, plotter, the figure's title: what it compares, not the file's name)
PLOTTERS = (
    ("cpu_engine_*.json", plot_cpu_engine, "CPU engine against scikit-learn and python-graphblas"),
    ("gpu_bench_*.json", plot_gpu_bench, "Distances on the GPU against other GPU kernels and scikit-learn"),
    ("knn_bench*.json", plot_knn_bench, "k nearest neighbours: ours on the GPU and CPU against scikit-learn"),
    ("graph_bench*.json", plot_graph_bench, "Graph measures on the GPU against cuSPARSE and python-graphblas"),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for pattern, plot, title in PLOTTERS:
        files = sorted(args.results.glob(pattern))
        if not files:
            print(f"no {pattern} in {args.results}: skipped")
        for path in files:
            try:
                fig = plot(json.loads(path.read_text()), title)
            except (KeyError, TypeError, ValueError) as exc:  # a result written by another version of its script
                print(f"{path.name}: not plotted ({type(exc).__name__}: {exc})")
                plt.close("all")
                continue
            target = args.out / f"{path.stem}.png"
            fig.tight_layout()
            # bbox_inches="tight" grows the image to hold the legends outside the axes; no version stamp:
            # the same data, the same file
            fig.savefig(target, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
            plt.close(fig)
            print(f"{path.name} -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
