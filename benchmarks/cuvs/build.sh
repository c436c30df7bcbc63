#!/usr/bin/env bash
# Build the cuVS harness (harness.cu) against an unpacked cuVS tree (prepare.sh's tarball: ROOT/include, ROOT/lib)
# and the CUDA 13 math libraries of the pip packages nvidia-cublas, -cusparse, -cusolver, -curand and
# nvidia-nccl-cu13 (headers in NV/cu13/include, libraries in NV/cu13/lib and NV/nccl/lib, NV being the
# site-packages folder `nvidia`; found through python3 unless NV is set). The RPATH (not RUNPATH: it serves libcuvs.so's own needs too) names the library folders,
# so the harness runs with no LD_LIBRARY_PATH.
# Usage: bash benchmarks/cuvs/build.sh ROOT [OUTPUT]   (OUTPUT defaults to ROOT/cuvs_harness)
set -euo pipefail
ROOT=$(cd "$1" && pwd)
OUTPUT=${2:-$ROOT/cuvs_harness}
HERE=$(cd "$(dirname "$0")" && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
NV=${NV:-$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])')}
[ -f "$NV/cu13/include/cublas_v2.h" ] || { echo "no cuBLAS headers under $NV/cu13/include (set NV)" >&2; exit 1; }
# RAPIDS's own CCCL (include/rapids) ahead of the toolkit's; the defines and flags cuVS's CMake package exports.
"$NVCC" -std=c++20 -O2 -arch="${CUDA_ARCH:-sm_90}" --expt-extended-lambda --expt-relaxed-constexpr \
  -I"$ROOT/include/rapids" -I"$ROOT/include" -I"$NV/cu13/include" \
  -DRAFT_LOG_ACTIVE_LEVEL=RAPIDS_LOGGER_LOG_LEVEL_INFO -DRAFT_SYSTEM_LITTLE_ENDIAN=1 \
  -Xcompiler -Wno-deprecated-declarations \
  "$HERE/harness.cu" -o "$OUTPUT" \
  -L"$ROOT/lib" -lcuvs -lrmm -lrapids_logger -Xlinker --allow-shlib-undefined -Xlinker --disable-new-dtags \
  -Xlinker -rpath="$ROOT/lib:$NV/cu13/lib:$NV/nccl/lib"
echo "built $OUTPUT"
