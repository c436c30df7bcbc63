#!/usr/bin/env bash
# HERE (a machine with pip and network, x86-64): fetch cuVS 26.10 for CUDA 13 and the wheels its headers and
# libcuvs.so need, keep only what building and running benchmarks/cuvs/harness.cu takes (headers, the shared
# libraries; in libcuvs.so only the kernels of CUDA_ARCH, 90 by default, for the H100/H200: keep_arch.py), pack
# them as one xz tarball and split it into parts under 55 MiB, one per folder DEST/.dev-cuvs1, DEST/.dev-cuvs2, ...
# (DEST: the checkout the device tool sends, /work/main by default; its .git/info/exclude must ignore /.dev-*/).
# With sm_90 alone it is one part of 46 MiB; CUDA_ARCH=all keeps every architecture (4 parts, 172 MB).
# device_steps.md says how the parts travel and are put back together.
# Usage: [CUDA_ARCH=90|all] bash benchmarks/cuvs/prepare.sh [DEST]
set -euo pipefail
DEST=${1:-/work/main}
VERSION=${CUVS_VERSION:-26.10}
WORK=${CUVS_WORK:-/tmp/cuvs-prepare}
ARCH=${CUDA_ARCH:-90}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../parts.sh"
grep -qx '/.dev-\*/' "$DEST/.git/info/exclude" || { echo "$DEST/.git/info/exclude must ignore /.dev-*/" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/wheels" "$WORK/unpacked" "$WORK/root/include" "$WORK/root/lib"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$WORK/wheels" \
  "libcuvs-cu13==$VERSION.*" "libraft-cu13==$VERSION.*" "librmm-cu13==$VERSION.*" "libkvikio-cu13==$VERSION.*" \
  rapids-logger
for w in "$WORK"/wheels/*.whl; do unzip -q -o "$w" -d "$WORK/unpacked"; done
cd "$WORK/unpacked"
# Headers: cuVS, RAFT, RMM, rapids-logger, NVTX, and the CCCL (thrust, cub, libcu++) RAPIDS was built with.
cp -r libcuvs/include/cuvs libraft/include/raft librmm/include/rmm librmm/include/nvtx3 \
  rapids_logger/include/rapids_logger "$WORK/root/include/"
cp -r libraft/include/rapids "$WORK/root/include/rapids"
# Shared libraries, side by side (libcuvs.so finds the others through its RPATH $ORIGIN).
cp libcuvs/lib64/libcuvs.so librmm/lib64/librmm.so libkvikio/lib64/libkvikio.so \
  rapids_logger/lib64/librapids_logger.so libcuvs_cu13.libs/* libkvikio_cu13.libs/* "$WORK/root/lib/"
cat libcuvs/GIT_COMMIT libcuvs/VERSION > "$WORK/root/CUVS_VERSION" 2>/dev/null || true
[ "$ARCH" = all ] || python3 "$HERE/keep_arch.py" "$WORK/root/lib/libcuvs.so" "$ARCH"
ls -la "$WORK/root/lib"
tar -C "$WORK/root" -cf - . | xz -6 -T0 > "$WORK/cuvs.tar.xz"
parts_split "$WORK/cuvs.tar.xz" cuvs "$DEST"
du -sh "$DEST"/.dev-cuvs*
