"""The engines that run semirings, installed as ``semiring.kernels``.

Two engines, each implementing the interfaces of ``semiring.interfaces``
(``PairwiseEngine`` and ``GraphEngine``):

* ``semiring.kernels.cpu`` — numba kernels on host memory, on all cores
  (``ENGINE``, ``GRAPH_ENGINE``);
* ``semiring.kernels.cuda`` — NVRTC-compiled kernels run through CuPy on a GPU.
  Rendering CUDA C from a spec imports no GPU library, so every kernel can be
  rendered and compiled (NVRTC) on a machine without a GPU.

Callers do not import an engine by name: ``semiring.backend`` resolves a
``backend=`` name (``"cpu"``, ``"cuda"``, ``"auto"``) to an engine, importing it
only then, and says why when the requested one cannot run.  This package
imports no engine, so importing the CPU engine never touches CuPy.
"""
