"""``python -m benchmarks stamp FILE...``: the commit of results files written where git could not tell it.

A results file records the engine's source digest (``record.engine_digest``) beside the commit it was told.
On the lent GPU machine the tree travels without its own git metadata, so the commit there is ``$COMMIT`` or
"unknown", or wrong where a stale ``.git`` travelled with it. Here, with the history at hand, ``stamp`` finds
the commits whose engine source has that digest (the newest ``--depth`` commits from HEAD) and writes the
newest of them into the file's ``meta.commit``, keeping what the file said in ``meta.commit_recorded`` and
saying how in ``meta.commit_note``; where no commit has it (uncommitted code ran), the file is left as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import record


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", type=Path, help="results files")
    p.add_argument("--depth", type=int, default=300, help="how many commits back from HEAD to look")


def commits_with_digest(digest: str, depth: int) -> list[str]:
    """Short hashes, newest first, of the commits whose engine source has ``digest``."""
    found = []
    for rev in record.git("rev-list", f"--max-count={depth}", "HEAD").split():
        if record.engine_digest_at(rev) == digest:
            found.append(rev[:7])
        elif found:
            break  # the engine changed before the run of equal commits: older ones are another code
    return found


def main(args) -> int:
    status = 0
    for path in args.files:
        data = json.loads(path.read_text())
        meta = data.get("meta", data)
        digest = meta.get("engine_digest")
        if not digest:
            print(f"{path}: no engine digest recorded; left as it is")
            status = 1
            continue
        found = commits_with_digest(digest, args.depth)
        if not found:
            print(f"{path}: no commit of the last {args.depth} has its engine source; left as it is")
            status = 1
            continue
        meta.setdefault("commit_recorded", meta.get("commit"))
        meta["commit"] = found[0]
        meta["commit_note"] = (
            f"stamped by python -m benchmarks stamp from the engine digest {digest}: the engine source of "
            f"{', '.join(found[:5])}{' ...' if len(found) > 5 else ''} (newest first); recorded at the run: "
            f"{meta['commit_recorded']}"
        )
        path.write_text(json.dumps(data, indent=1))
        print(f"{path}: commit {found[0]} (recorded {meta['commit_recorded']})")
    return status
