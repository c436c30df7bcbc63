"""Engines that run semiring specs: ``cpu`` (numba, multi-core) and the CUDA source renderer.

``kernels.cuda_source`` renders CUDA C from a spec and imports no GPU library,
so every kernel can be rendered and compiled (NVRTC) on a machine without a GPU.
"""
