#!/usr/bin/env bash
# HERE (a machine with pip and network, x86-64): fetch cuGraph's Python API (pylibcugraph 26.10 for CUDA 13) and
# the RAPIDS wheels it loads that the GPU machine lacks, unpack them into one tree as `pip install --target`
# would (site/), keep only what importing and running pylibcugraph takes (no headers, no CMake files, not
# libcugraph_mtmg.so, which nothing loads), keep in each shared library only the kernels of CUDA_ARCH (90 by
# default, for the H100/H200: ../cuvs/keep_arch.py), pack the tree as one xz tarball and split it into parts
# under 55 MB, one per folder DEST/.dev-cugraph1, DEST/.dev-cugraph2, ... (DEST: the checkout the device tool
# sends, /work/main by default; its .git/info/exclude must ignore /.dev-*/). device_steps.md says how the parts
# travel and are put back together. With sm_90 alone it is 3 parts, 55 + 55 + 10 MB (120 MB; the wheels are 780 MB).
#
# What travels, from each wheel's Requires-Dist followed down: pylibcugraph-cu13 -> libcugraph-cu13, pylibraft-cu13,
# rmm-cu13; libcugraph -> libcuvs-cu13 (libcugraph.so links libcuvs.so), libraft-cu13, librmm-cu13; libcuvs ->
# libkvikio-cu13; all -> rapids-logger. What stays behind, being the GPU machine's own (beside CuPy 14.2): numpy,
# cupy-cuda13x, cuda-bindings and cuda-pathfinder (rmm and pylibraft import the first, libcuvs and libkvikio
# the second), and the nvidia-* CUDA 13 libraries (cuBLAS, cuSOLVER, cuSPARSE, cuRAND, nvJitLink, NVRTC, NCCL,
# cuFile), which the libraries find through their RPATH $ORIGIN/../../nvidia/...: device.sh links that folder
# (and copes with an nvJitLink older than the 13.3 that libcuvs.so asks for).
# Usage: [CUDA_ARCH=90|all] bash benchmarks/cugraph/prepare.sh [DEST]
set -euo pipefail
DEST=${1:-/work/main}
VERSION=${CUGRAPH_VERSION:-26.10}
WORK=${CUGRAPH_WORK:-/tmp/cugraph-prepare}
ARCH=${CUDA_ARCH:-90}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../parts.sh"
grep -qx '/.dev-\*/' "$DEST/.git/info/exclude" || { echo "$DEST/.git/info/exclude must ignore /.dev-*/" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/wheels" "$WORK/site"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WORK/wheels" \
  "pylibcugraph-cu13==$VERSION.*" "pylibraft-cu13==$VERSION.*" "rmm-cu13==$VERSION.*" \
  "libcugraph-cu13==$VERSION.*" "libcuvs-cu13==$VERSION.*" "libraft-cu13==$VERSION.*" "librmm-cu13==$VERSION.*" \
  "libkvikio-cu13==$VERSION.*" "rapids-logger==0.3.*"
ls -la "$WORK/wheels"
for w in "$WORK"/wheels/*.whl; do unzip -q -o "$w" -d "$WORK/site"; done
cd "$WORK/site"
# Not needed to import or run: C++ headers, CMake package files, the multi-node multi-GPU library.
rm -rf ./*/include ./*/lib64/cmake ./*/lib64/rapids libcugraph/lib64/libcugraph_mtmg.so
# Each auditwheel .libs folder vendors the same libgomp: one copy, hard-linked (tar keeps the links).
for f in ./*.libs/*; do
  first=$(ls ./*.libs/"$(basename "$f")" | head -1)
  if [ ! "$f" -ef "$first" ] && cmp -s "$f" "$first"; then ln -f "$first" "$f"; fi
done
if [ "$ARCH" != all ]; then
  for lib in $(find . -name '*.so' -size +1M); do
    if readelf -SW "$lib" | grep -q ' \.nv_fatbin '; then python3 "$HERE/../cuvs/keep_arch.py" "$lib" "$ARCH"; fi
  done
fi
find . -name '*.so' -size +1M -exec ls -la {} +
for w in "$WORK"/wheels/*.whl; do basename "$w"; done > WHEELS
# xz's x86 filter first (a few per cent off the libraries' host code; any xz undoes it).
tar -C "$WORK" -cf - site | xz -T0 --x86 --lzma2=preset=6 > "$WORK/cugraph.tar.xz"
parts_split "$WORK/cugraph.tar.xz" cugraph "$DEST"
ls -l "$DEST"/.dev-cugraph*/*
