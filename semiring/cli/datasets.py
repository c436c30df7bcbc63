"""A small real dataset every install has: TF-IDF of the Python standard library's docstrings.

Each row is one public module of the standard library of the running Python;
its text is the module's docstring plus the docstrings of its classes and
functions, read from the ``.py`` files with :mod:`ast` — no module is imported,
so nothing runs and nothing is downloaded.  ``semiring knn`` without an input
file finds, by cosine distance between these rows, the modules most similar to
a few well-known ones.

>>> corpus = stdlib_tfidf()
>>> corpus.X.shape[0] == len(corpus.names) > 100, corpus.X.shape[1] == len(corpus.vocabulary)
(True, True)
"""

from __future__ import annotations

import ast
import gc
import hashlib
import os
import re
import sys
import sysconfig
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

# Folders that hold no public modules, or only tests, demos and generated tables
# (the codec and pydoc-topic modules would crowd out the rest).
SKIPPED_PACKAGES = frozenset(
    {"test", "tests", "idlelib", "turtledemo", "encodings", "pydoc_data", "lib2to3", "ensurepip", "site-packages"}
)

# Common English words, and the few words of Python's docstring boilerplate that say nothing about a module's topic.
STOP_WORDS = frozenset(
    """a about above after again against all also an and any are as at be been before being below between both but
    by can could did do does doing done down during each either else etc even ever every few for from further had has
    have having here how however if in into is it its itself just may might more most much must no nor not now of off
    on once one only or other otherwise our out over own same should since so some such than that the their them then
    there these they this those through thus to too two under until up upon us use used uses using very via was we
    were what when where whether which while who whom whose why will with within without would yet you your
    arg args kwargs self cls none true false return returns returned default optional given""".split()  # noqa: SIM905 - a list of words reads best as text
)

_WORD = re.compile(r"[a-z][a-z0-9]+")


@dataclass(frozen=True)
class Corpus:
    """A TF-IDF matrix with the names of its rows and columns."""

    X: sp.csr_matrix  # rows l2-normalised, float64
    names: list[str]  # one per row
    vocabulary: list[str]  # one per column, sorted


def stdlib_root() -> str:
    """The folder of the running Python's standard library."""
    return sysconfig.get_paths()["stdlib"]


def module_files(root: str | None = None) -> dict[str, str]:
    """``{module name: path}`` for the public modules under ``root``, in name order.

    Public: no component of the name starts with ``_`` (packages count through
    their ``__init__.py``), no component is a test, demo or generated-table
    package (``SKIPPED_PACKAGES``).
    """
    root = root or stdlib_root()
    found = {}
    for folder, dirs, files in os.walk(root):
        # Descend only into packages: that skips lib-dynload, config-*, site-packages and the like.
        dirs[:] = [
            d
            for d in dirs
            if d.isidentifier()
            and not d.startswith("_")
            and d not in SKIPPED_PACKAGES
            and os.path.exists(os.path.join(folder, d, "__init__.py"))
        ]
        package = os.path.relpath(folder, root).replace(os.sep, ".")
        package = "" if package == "." else package + "."
        for f in files:
            stem, ext = os.path.splitext(f)
            if ext == ".py" and stem.isidentifier():
                if stem == "__init__" and package:
                    found[package[:-1]] = os.path.join(folder, f)
                elif not stem.startswith("_"):
                    found[package + stem] = os.path.join(folder, f)
    return dict(sorted(found.items()))


def docstrings(path: str) -> str:
    """The module's docstring and those of its classes and functions, without importing it ('' if unreadable)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):  # a file of another Python version, or not Python after all
        return ""
    return "\n".join(filter(None, (ast.get_docstring(node, clean=False) for node in _documented(tree))))


_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _documented(node):
    """The node and the classes and functions defined in it, at any depth.

    Descends through statements only: definitions live there, and skipping the
    expressions (most of a syntax tree) makes this several times faster than ``ast.walk``.
    """
    if isinstance(node, (ast.Module, *_DEFINITIONS)):
        yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield from _documented(child)


def tokens(text: str) -> list[str]:
    """Lower-case words of two or more letters or digits (starting with a letter), stop words removed."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def tfidf(documents: list[list[str]], min_df: int = 2, max_df: float = 0.5) -> tuple[sp.csr_matrix, list[str]]:
    """TF-IDF of tokenised documents: sublinear tf ``1 + log(count)``, smooth idf, rows of unit l2 norm.

    The vocabulary holds the words in at least ``min_df`` documents and at most
    a ``max_df`` fraction of them, sorted.  idf is ``log((1 + n) / (1 + df)) + 1``
    (scikit-learn's ``smooth_idf``), so the result equals scikit-learn's
    ``TfidfVectorizer(sublinear_tf=True)`` over the same vocabulary.
    """
    counts = [Counter(doc) for doc in documents]
    df = Counter(word for c in counts for word in c)
    n = len(documents)
    vocabulary = sorted(w for w, d in df.items() if d >= min_df and d <= max_df * n)
    column = {w: j for j, w in enumerate(vocabulary)}
    indptr, indices, data = [0], [], []
    for c in counts:
        row = sorted((column[w], k) for w, k in c.items() if w in column)
        indices.extend(j for j, _ in row)
        data.extend(k for _, k in row)
        indptr.append(len(indices))
    X = sp.csr_matrix(
        (np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int32), np.asarray(indptr, dtype=np.int64)),
        shape=(n, len(vocabulary)),
    )
    idf = np.log((1.0 + n) / (1.0 + np.array([df[w] for w in vocabulary], dtype=np.float64))) + 1.0
    X.data = (1.0 + np.log(X.data)) * idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X.data /= np.repeat(np.where(norms > 0, norms, 1.0), np.diff(X.indptr))
    return X, vocabulary


def stdlib_tfidf(root: str | None = None, min_words: int = 20, cache: str | os.PathLike | None = None) -> Corpus:
    """TF-IDF rows of the standard library's public modules with at least ``min_words`` words of docstrings.

    Deterministic for a given Python installation; parsing ~400 files takes a second or two.  With ``cache`` (a
    folder), the corpus is kept there and read back by the next call, in any process, in milliseconds: the file's
    name is a digest of everything the corpus depends on (this module's code, the Python version, ``min_words``,
    and each source file's path, size and time stamp), so a changed source makes a new one.
    """
    files = module_files(root)
    if cache is None:
        return _build(files, root, min_words)
    h = hashlib.sha256(f"{sys.version}\0{min_words}\0".encode() + Path(__file__).read_bytes())
    for name, path in files.items():
        st = os.stat(path)
        h.update(f"\0{name}\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    path = Path(cache) / f"stdlib_tfidf_{h.hexdigest()[:32]}.npz"
    try:
        with np.load(path, allow_pickle=False) as saved:
            X = sp.csr_matrix((saved["data"], saved["indices"], saved["indptr"]), shape=tuple(saved["shape"]))
            return Corpus(X, saved["names"].tolist(), saved["vocabulary"].tolist())
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # not made yet, or unreadable: build it
        pass
    corpus = _build(files, root, min_words)
    _save(path, corpus)
    return corpus


def _save(path: Path, corpus: Corpus) -> None:
    """Write the corpus atomically (a temporary file, then a rename); a cache that cannot be written is skipped."""
    X = corpus.X
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", suffix=".npz", delete=False) as tmp:
            np.savez(
                tmp,
                data=X.data,
                indices=X.indices,
                indptr=X.indptr,
                shape=np.array(X.shape),
                names=np.array(corpus.names, dtype=str),
                vocabulary=np.array(corpus.vocabulary, dtype=str),
            )
        os.replace(tmp.name, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp.name):
            os.unlink(tmp.name)


def _build(files: dict[str, str], root: str | None, min_words: int) -> Corpus:
    names, documents = [], []
    # Syntax trees are many small objects the cycle collector keeps rescanning, to no use: they are
    # freed by reference counting. Pausing it halves the time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for name, path in files.items():
            words = tokens(docstrings(path))
            if len(words) >= min_words:
                names.append(name)
                documents.append(words)
    finally:
        if collecting:
            gc.enable()
    if len(names) < 2:
        raise FileNotFoundError(
            f"found {len(names)} documented Python modules under {root or stdlib_root()!r}; "
            "this installation ships no standard library sources — pass an input file instead"
        )
    X, vocabulary = tfidf(documents)
    return Corpus(X, names, vocabulary)
