"""Graph measures on the semiring primitive: similarities, common neighbours, triangles, k-truss.

Every function takes the adjacency matrix ``A`` of an undirected graph (a
SciPy sparse matrix or array, a dense array, a CuPy sparse matrix, or a
networkx graph) and a ``backend`` (``"cpu"``, ``"cuda"``, ``"auto"``, as in
``semiring.pairwise``; ``"auto"`` keeps CuPy input on the GPU).  Results follow
the input: SciPy in, SciPy out (a matrix or an array, as given); CuPy in, CuPy
out.  A networkx graph (networkx is imported only then) is read as
``nx.to_scipy_sparse_array(G, nodelist=list(G), weight=weight)`` — weights
from the edge attribute ``weight`` (1 where an edge lacks it), as networkx's
functions read them — and its results are networkx's shapes, keyed by its
nodes (``semiring.graph.labelled``): ``{node: value}`` per vertex,
``{(u, v): value}`` per edge (each edge once, as ``G.edges()`` orients it),
``(u, v, value)`` triples for similarities (as ``nx.jaccard_coefficient``),
a networkx graph for ``ktruss`` (as ``nx.k_truss``); ``pairs`` are node
labels.

``as_frame=True`` gives a DataFrame with cuGraph's column names (``first``,
``second``, ``jaccard_coeff``; ``vertex``, ``counts``), each edge once: pandas
(optional, imported only then), or cuDF for CuPy input where it is installed.

A Dask array of A's row blocks (or ``hold``'s held graph) is computed in
row blocks on the workers (``docs/dask.md``): by default the result is the
single-machine one, gathered; ``compute=False`` leaves a per-edge result there,
a Dask array of CSR row blocks (or with ``as_frame=True`` a Dask DataFrame of
cuGraph's columns, as cuGraph's ``dask`` functions return), and the triangle
total and per-vertex counts are summed on the workers.

Pair results: ``as_pairs=True`` gives the similarities as three arrays
``(first, second, value)``, the way cuGraph's ``jaccard`` returns its
``first``, ``second`` and coefficient columns; ``two_hop_similarity`` gives
every pair at distance ≤ 2 (or the ``topk`` best) in that form.

Definitions (N(u) the neighbours of u, d(u) = |N(u)|, c = |N(u) ∩ N(v)|):

* similarities of a vertex pair — ``jaccard`` c / (d(u) + d(v) − c),
  ``sorensen`` 2c / (d(u) + d(v)), ``overlap`` c / min(d(u), d(v)), ``cosine``
  c / sqrt(d(u) d(v)); 0 where the denominator is 0.  Through the primitive,
  c is the masked product ``C⟨M⟩ = A plus.pair Aᵀ`` and d a row norm; at the
  edges of A (the default) a specialised kernel counts c once per undirected
  edge.  ``weighted=True`` replaces counts by sums of (non-negative) weights:
  c = Σ_k min(w(u,k), w(v,k)) and d(u) = Σ_k w(u,k) (so Jaccard becomes
  Σ min / Σ max), and for ``cosine`` c = Σ_k w(u,k) w(v,k), d(u) = Σ_k w(u,k)².
* ``adamic_adar_index`` — Σ over the common neighbours w of 1 / log d(w), as
  networkx's: c sums each common neighbour's own weight (``neighbour_weight``).
* ``resource_allocation_index`` — Σ over the common neighbours w of 1 / d(w),
  as networkx's, likewise.
* ``scan_similarity`` — SCAN's structural similarity on closed
  neighbourhoods at each edge: (c + 2) / sqrt((d(u) + 1)(d(v) + 1)).
* ``common_neighbors`` — c at every edge.
* ``triangle_count`` — each triangle counted once: the edges are oriented
  u → v when u precedes v in a total order (``order="degree"``: by degree,
  ties by id; ``order="id"``), and Σ over u → v of |N⁺(u) ∩ N⁺(v)| counts each
  triangle at its two lowest vertices.
* ``ktruss`` / ``truss_decomposition`` — the supports (triangles per edge)
  peeled: the edges in fewer than k − 2 triangles removed, and the supports of
  the edges that shared a triangle with them lowered, until none is removed.

Input rules: ``A`` must be square and symmetric (structurally; also in its
values for ``weighted=True``) without self-loops; otherwise a ``ValueError``
says which rule and how many entries break it.  ``normalize=True`` instead
removes self-loops and symmetrises (the pattern of A + Aᵀ; an edge stored in
both directions with different weights keeps the larger).  The stored pattern
is the graph: an explicitly stored 0 is an edge (of weight 0).  Isolated
vertices, empty graphs and int64 indices are supported.

>>> import numpy as np, scipy.sparse as sp
>>> from semiring import graph
>>> A = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]]))
>>> graph.triangle_count(A, backend="cpu")
1
>>> graph.triangle_count(A, per="vertex", backend="cpu")
array([1, 1, 1, 0])
>>> graph.jaccard(A, backend="cpu").toarray().round(3)
array([[0.   , 0.333, 0.25 , 0.   ],
       [0.333, 0.   , 0.25 , 0.   ],
       [0.25 , 0.25 , 0.   , 0.   ],
       [0.   , 0.   , 0.   , 0.   ]])
>>> graph.jaccard(A, pairs=[(0, 3), (1, 1)], backend="cpu")
array([0.5, 1. ])
>>> first, second, value = graph.jaccard(A, as_pairs=True, backend="cpu")
>>> first, second, value.round(3)
(array([0, 0, 1, 2]), array([1, 2, 2, 3]), array([0.333, 0.25 , 0.25 , 0.   ]))
>>> graph.two_hop_similarity(A, "jaccard", topk=2, backend="cpu")
(array([0, 1]), array([3, 3]), array([0.5, 0.5]))
>>> graph.truss_decomposition(A, backend="cpu").toarray()
array([[0, 3, 3, 0],
       [3, 0, 3, 0],
       [3, 3, 0, 2],
       [0, 0, 2, 0]])
"""

from .measures import *  # the public functions and SIMILARITIES: the names in measures.__all__
from .measures import __all__ as __all__
