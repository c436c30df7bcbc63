"""The project's benchmarks as one tool: ``python -m benchmarks <suite> [options]`` (``--help`` lists them).

Suites (each checks every result, ours and each peer's, against an independent oracle in the same run, and
writes a results file that says what ran, on what and from which code: ``record``):

    distances   every measure on the GPU at the public call, with cuVS, cuSPARSE, cuBLAS, the naive merge, scikit-learn
    knn         k-nearest neighbours: all pairs on the GPU with cuVS, cuSPARSE, cuBLAS; a subset with scikit-learn
    scale       all-pairs kNN at the sizes users have (40k, 300k, 1M rows), ours against cuVS (scale.py)
    graph       triangles, Jaccard, common neighbours on R-MAT graphs with cuSPARSE, cuGraph, python-graphblas
    cpu         the CPU engine with scikit-learn, python-graphblas and networkx on the same threads
    dask        one GPU against two on Dask
    startup     import and first-call costs of the CPU engine, each from a fresh process
    suite-time  the test suite's counts and time, as CI runs it
    docs        the tables of docs/ made from the results files (``--check``: fail where they differ)

and the tools behind particular decisions: ``profile`` (a GPU call's stages), ``cpu-profile``, ``strategies``
(every GPU strategy forced in turn), ``cpu-ab`` (builds interleaved), ``cpu-union``, ``stamp`` (the commit of a file written without git).
``benchmarks/gpu_run.sh`` runs the GPU suites on the lent GPU machine (the package laid out as installed).

The shared parts, for a new suite:

* ``synthetic``: ``make_dataset(name, scale, seed)`` (float32 CSR shaped like the paper's data), ``describe``,
  ``rmat(scale, seed=..., xp=...)`` and ``rmat_csr``;
* ``timing``: ``on_device(fn, repeats)`` (CUDA events) and ``on_host(fn, repeats)`` (wall clock), both one
  warm-up then the median, returning ``(Timing, result)``; ``PeakMemory`` for device memory;
* ``peers``: every peer as its users call it (``CuvsHarness``, ``product_peers``, ``sklearn_pairwise``,
  ``sklearn_knn``, ``graphblas_graph``, ``networkx_ktruss``, ``cugraph_graph``);
* ``reference``: the oracles (``pairwise_reference``, ``compare``, ``knn_reference``, ``knn_check``,
  ``edge_check``) returning check dicts;
* ``record``: ``Results(suite, args, path)``, ``add(row)`` after each measurement, ``finish()``.

A suite module has ``add_arguments(parser)`` and ``main(args) -> int`` (0, or 1 where a check of ours failed).
"""
