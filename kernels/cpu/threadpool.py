"""The CPU engine's threads under threadpoolctl: listed by ``threadpool_info()``, limited by ``threadpool_limits``.

The engine's kernels run on numba's threads, whose number numba sets per
calling thread (``numba.set_num_threads``).  threadpoolctl finds the libraries
it controls among the shared objects loaded in the process, by file name; a
controller registered here claims numba's helper library (``numba/_helperlib``,
loaded with numba) and reads and sets numba's number of threads, so

    with threadpoolctl.threadpool_limits(limits=1):
        distances.pairwise_distances(X)          # one thread

limits the engine as it limits BLAS and OpenMP (``user_api="numba"`` limits it
alone).  ``threadpool_info()`` lists it as ``{"user_api": "numba",
"internal_api": "numba", "num_threads": ..., "threading_layer": ...}``.

Reading the number starts no thread (before the first parallel kernel it is
the number numba will start); setting it starts numba's threads if they are
not yet running (a process forked after that is subject to the fork rules of
``semiring.kernels.cpu.jit``).  An explicit ``n_jobs`` of a call still sets
that call's threads (within numba's maximum), as scikit-learn's ``n_jobs``
does beside threadpoolctl's limits.  Registered when the CPU engine is loaded,
where threadpoolctl (scikit-learn's dependency, not ours) is installed.
"""

from __future__ import annotations

import numba

__all__ = ["register"]


def _controller_class():
    from threadpoolctl import LibController

    class NumbaController(LibController):
        """numba's threads (the CPU engine's), for threadpoolctl."""

        user_api = "numba"
        internal_api = "numba"
        filename_prefixes = ("_helperlib",)

        def get_num_threads(self) -> int:
            from numba.np.ufunc import parallel

            if not parallel._is_initialized:  # no thread started: the number the first kernel would start
                return int(numba.config.NUMBA_NUM_THREADS)
            return int(numba.get_num_threads())

        def set_num_threads(self, num_threads: int) -> None:
            numba.set_num_threads(max(1, min(int(num_threads), numba.config.NUMBA_NUM_THREADS)))

        def get_version(self) -> str:
            return numba.__version__

        def set_additional_attributes(self) -> None:
            self.threading_layer = numba.config.THREADING_LAYER

    return NumbaController


_registered = False


def register() -> bool:
    """Register numba's threads with threadpoolctl, once; False where threadpoolctl is not installed."""
    global _registered
    if _registered:
        return True
    try:
        import threadpoolctl
    except ImportError:
        return False
    threadpoolctl.register(_controller_class())
    _registered = True
    return True
