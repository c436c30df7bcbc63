#!/usr/bin/env bash
# The GPU suites on the lent GPU machine (no network, no install of ours): lay the package out by hand as the
# wheel does (semiring/ with distances/ and kernels/ inside), then run each job named, its results file and log
# into $OUT.  The commit recorded is git's where the tree has its metadata, else $COMMIT; every results file also
# holds the engine's source digest, which `python -m benchmarks stamp FILE` matches to a commit here.
#
#   bash benchmarks/gpu_run.sh [tests] [distances] [knn] [graph] [dask] [scale] [retrieval] [profile] [strategies] [dense-gpu] [cpu] [cpu-profile]
#
# Each suite's options: DISTANCES_ARGS, KNN_ARGS, GRAPH_ARGS, DASK_ARGS, SCALE_ARGS, RETRIEVAL_ARGS, PROFILE_ARGS, STRATEGIES_ARGS, DENSE_GPU_ARGS,
# CPU_ARGS, CPU_PROFILE_ARGS (added to the defaults below); SEED (default 0; the graph suite's R-MAT seed 1).
# GPU_TESTS: test paths instead of the whole GPU tier.  cuVS joins distances and knn where its harness is built
# ($CUVS_HARNESS or ~/cuvs/root/cuvs_harness: benchmarks/cuvs/device_steps.md); cuGraph joins graph where its
# unpacked wheels are ($CUGRAPH_SITE or ~/cugraph/site, added to PYTHONPATH: benchmarks/cugraph/device_steps.md).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
SEED=${SEED:-0}
mkdir -p "$OUT"
PKG=$(mktemp -d)
cp -r "$REPO/semiring" "$PKG/semiring"
cp -r "$REPO/distances" "$PKG/semiring/distances"
cp -r "$REPO/kernels" "$PKG/semiring/kernels"
# the laid-out package first (the checkout's own semiring/ lacks its subpackages), then the checkout for benchmarks/
# (not for the tests: there the checkout would make a top-level `distances` importable, as no install does)
CARRIED=${PYTHONPATH:-}
CUGRAPH_SITE=${CUGRAPH_SITE:-$HOME/cugraph/site}
[ -d "$CUGRAPH_SITE/pylibcugraph" ] && CARRIED="${CARRIED:+$CARRIED:}$CUGRAPH_SITE"
export PYTHONPATH="$PKG:$REPO${CARRIED:+:$CARRIED}" PYTHONUNBUFFERED=1
cd "$PKG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/env.log"
python3 -c "import cupy, numpy, scipy; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)" | tee -a "$OUT/env.log"
[ -d "$CUGRAPH_SITE/pylibcugraph" ] && echo "PYTHONPATH has cuGraph's wheels: $CUGRAPH_SITE" | tee -a "$OUT/env.log"
status=0
suite() {  # suite NAME FILE ARGS...: python -m benchmarks NAME ARGS --json $OUT/FILE.json, its log beside
  local name=$1 file=$2
  shift 2
  echo "# python -m benchmarks $name $* --json $file.json" | tee "$OUT/$file.log"
  python3 -m benchmarks "$name" "$@" --json "$OUT/$file.json" 2>&1 | tee -a "$OUT/$file.log" || status=1
}
for job in "$@"; do
  case $job in
    tests)
      echo "# HYPOTHESIS_EXAMPLES=10 python -m pytest -m gpu tests/gpu -q  (the architecture tests read an installed package: CI runs them)" | tee "$OUT/gpu_tests.log"
      # Not pyproject's addopts (xdist is not installed there): one process, or workers where pytest-xdist's and
      # execnet's wheels are carried and installed and PYTEST_ADDOPTS="-n 12 --dist load" (docs/cuda.md, GPU tests).
      PYTHONPATH="$PKG${CARRIED:+:$CARRIED}" HYPOTHESIS_EXAMPLES=10 python3 -m pytest -c "$REPO/pyproject.toml" --rootdir "$REPO" -q -p no:cacheprovider \
        -o addopts="-ra --import-mode=importlib" \
        ${GPU_TESTS:-"$REPO/tests/gpu"} 2>&1 | tee -a "$OUT/gpu_tests.log" || status=1 ;;
    distances) suite distances distances --seed "$SEED" ${DISTANCES_ARGS:-} ;;
    knn) suite knn knn --seed "$SEED" ${KNN_ARGS:-} ;;
    graph) suite graph graph --seed "${GRAPH_SEED:-1}" ${GRAPH_ARGS:-} ;;
    dask) suite dask dask --seed "$SEED" ${DASK_ARGS:---gpus 1,2} ;;  # dask, distributed, dask-cuda importable
    scale) suite scale "scale${SCALE_TAG:-}" --seed "$SEED" ${SCALE_ARGS:-} ;;
    retrieval) suite retrieval "retrieval${RETRIEVAL_TAG:-}" --seed "$SEED" ${RETRIEVAL_ARGS:-} ;;
    profile) suite profile profile --seed "$SEED" ${PROFILE_ARGS:?PROFILE_ARGS: --jobs dataset:metric:job,...} ;;
    strategies) suite strategies strategies --seed "$SEED" ${STRATEGIES_ARGS:-} ;;
    dense-gpu) suite dense-gpu dense_gpu --seed "$SEED" ${DENSE_GPU_ARGS:-} ;;
    cpu) suite cpu cpu --seed "$SEED" ${CPU_ARGS:-} ;;  # the CPU engine's table on the host's cores
    cpu-profile) suite cpu-profile cpu_profile --seed "$SEED" ${CPU_PROFILE_ARGS:?CPU_PROFILE_ARGS: its arguments} ;;
    *) echo "gpu_run.sh: unknown job $job" >&2; status=2 ;;
  esac
done
exit $status
