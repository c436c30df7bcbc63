"""The docs' table of measures, generated from the distance specs.

``python -m semiring.distances.measures_table`` prints it; ``docs/measures.md`` holds a copy
that a test keeps equal to this output.
"""

from __future__ import annotations

from .specs import DISTANCES, NORMS


def _semiring(sr) -> str:
    return f"`{sr.add.name}` / `{sr.mult.text}` ({sr.semantics})"


def _parameter(d, p) -> str:
    """``p (default 2; > 0, p = inf gives chebyshev)``: the declaration, as the error messages state it."""
    rewrites = "".join(f", {r}" for r in d.rewrites if r.param == p.name)
    return f"{p.name} (default {p.default:g}; {p.rule}{rewrites})"


def measures_table() -> str:
    header = (
        "| measure | aliases | SciPy `cdist` | formula | semiring terms (add / multiply, columns) | row norms "
        "| prepare | notes |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for d in DISTANCES:
        terms = "<br>".join(f"c{k}: {_semiring(sr)}" for k, sr in enumerate(d.terms))
        norms = ", ".join(f"{n} = Σ {NORMS[n]}" for n in d.norms) or "—"
        if d.row_terms:  # what the expansion then reads as nx*/ny*, once a row
            norms += "; then per row " + ", ".join(f"nx{k} ← `{t}`" for k, t in enumerate(d.row_terms))
        notes = d.note
        if d.on_nonnegative is not None:
            form = d.on_nonnegative
            kept = ", ".join(f"c{k}" for k in range(form.keep))
            notes = (
                f"{notes} On rows with no negative value: {kept} and `{form.expansion}`"
                f" ({', '.join(f'{n} = Σ {NORMS[n]}' for n in form.norms)})."
            ).strip()
        if d.nonnegative:
            notes = ("Non-negative input only. " + notes).strip()
        if d.parameters:
            notes = (f"Parameters: {', '.join(_parameter(d, p) for p in d.parameters)}. " + notes).strip()
        aliases = ", ".join(d.aliases) or "—"
        scipy = f"`{d.scipy}`" if d.scipy else "—"
        cells = [f"`{d.name}`", aliases, scipy, d.formula, terms, norms, d.prepare, notes]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return header + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(measures_table(), end="")
