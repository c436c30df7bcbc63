#!/usr/bin/env bash
# On the lent GPU machine (no network, no install of ours): lay the installed package out by hand, as the
# wheel does (semiring/ with distances/ and kernels/ inside), then run the GPU test tier and, if asked,
# the GPU benchmark (GPU_TESTS: test paths instead of the whole tier; DASK_ARGS: the scaling run's arguments;
# PROFILE_JOBS, PROFILE_ARGS, PROFILE_TAG: stage_profile.py's --jobs, further arguments, results file tag; PUBLIC_ARGS, PUBLIC_TAG: public_api_bench.py's further arguments and
# the tag in its results file's name).
# Usage: bash benchmarks/gpu_run.sh [tests] [bench] [knn] [public] [cuvs] [dask] [profile] [cpu] [cpustages] [scale] [smoke]; logs and JSON
# go to $OUT.  cuvs: public_api_bench.py with cuVS beside ours (the harness benchmarks/cuvs/device.sh built;
# CUVS_ARGS: more arguments).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PKG=$(mktemp -d)
cp -r "$REPO/semiring" "$PKG/semiring"
cp -r "$REPO/distances" "$PKG/semiring/distances"
cp -r "$REPO/kernels" "$PKG/semiring/kernels"
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$PKG"  # so that the checkout's own semiring/ (without its subpackages) is not the one imported
echo "commit ${COMMIT:-$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)}" | tee "$OUT/env.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/env.log"
python3 -c "import cupy, numpy, scipy; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)" | tee -a "$OUT/env.log"
status=0
for job in "$@"; do
  case $job in
    tests)
      echo "# HYPOTHESIS_EXAMPLES=10 python -m pytest -m gpu tests/gpu tests/unit/test_architecture.py -q" | tee "$OUT/gpu_tests.log"
      # Not pyproject's addopts (xdist is not installed there): one process, or workers where pytest-xdist's and
      # execnet's wheels are carried and installed and PYTEST_ADDOPTS="-n 12 --dist load" (docs/cuda.md, GPU tests).
      HYPOTHESIS_EXAMPLES=10 python3 -m pytest -c "$REPO/pyproject.toml" --rootdir "$REPO" -q -p no:cacheprovider \
        -o addopts="-ra --import-mode=importlib" \
        ${GPU_TESTS:-"$REPO/tests/gpu" "$REPO/tests/unit/test_architecture.py"} 2>&1 | tee -a "$OUT/gpu_tests.log" || status=1 ;;
    bench)
      python3 "$REPO/benchmarks/gpu_bench.py" --scale 1.0 --json "$OUT/gpu_bench_h200.json" 2>&1 | tee "$OUT/gpu_bench.log" || status=1 ;;
    knn)
      python3 "$REPO/benchmarks/knn_bench.py" --scale 1.0 --sk-queries 1024 --repeats 2 --json "$OUT/knn_bench.json" \
        2>&1 | tee "$OUT/knn_bench.log" || status=1 ;;
    public)
      python3 "$REPO/benchmarks/public_api_bench.py" --seed "${SEED:-0}" ${PUBLIC_ARGS:-} --json "$OUT/public_api_h200${PUBLIC_TAG:-}.json" \
        2>&1 | tee "$OUT/public_api.log" || status=1 ;;
    cuvs)  # needs $HOME/cuvs/root/cuvs_harness: benchmarks/cuvs/device_steps.md
      python3 "$REPO/benchmarks/public_api_bench.py" --seed "${SEED:-0}" --cuvs "${CUVS_HARNESS:-$HOME/cuvs/root/cuvs_harness}" \
        ${CUVS_ARGS:-} --json "$OUT/public_api_cuvs_h200.json" 2>&1 | tee "$OUT/public_api_cuvs.log" || status=1 ;;
    dask)  # needs dask, distributed and dask-cuda importable (docs/dask.md lists the wheels)
      python3 "$REPO/benchmarks/dask_scaling.py" ${DASK_ARGS:---gpus 1,2 --seed 0} --json "$OUT/dask_scaling.json" \
        2>&1 | tee "$OUT/dask_scaling.log" || status=1 ;;
    profile)
      python3 "$REPO/benchmarks/stage_profile.py" --seed "${SEED:-0}" --jobs "${PROFILE_JOBS:?PROFILE_JOBS: dataset:metric:job,...}" \
        ${PROFILE_ARGS:-} --json "$OUT/stage_profile${PROFILE_TAG:-}.json" 2>&1 | tee "$OUT/stage_profile${PROFILE_TAG:-}.log" || status=1 ;;
    cpu)  # the CPU engine's table on the machine's host cores (CPU_ARGS: cpu_engine.py's arguments)
      python3 "$REPO/benchmarks/cpu_engine.py" ${CPU_ARGS:?CPU_ARGS: cpu_engine.py arguments} 2>&1 | tee -a "$OUT/cpu_engine.log" || status=1 ;;
    cpustages)  # a CPU call's stages at the host's thread count (CPU_STAGE_ARGS: cpu_stage_profile.py's arguments)
      python3 "$REPO/benchmarks/cpu_stage_profile.py" ${CPU_STAGE_ARGS:?CPU_STAGE_ARGS: cpu_stage_profile.py arguments} \
        2>&1 | tee -a "$OUT/cpu_stage_profile.log" || status=1 ;;
    scale)  # all-pairs kNN at real sizes (SCALE_ARGS: scale.py's arguments, --seed among them)
      python3 "$REPO/benchmarks/scale.py" ${SCALE_ARGS:?SCALE_ARGS: scale.py arguments} --json "$OUT/scale${SCALE_TAG:-}.json" \
        2>&1 | tee -a "$OUT/scale.log" || status=1 ;;
    smoke)
      python3 "$REPO/benchmarks/gpu_smoke.py" 2>&1 | tee "$OUT/gpu_smoke.log" || status=1 ;;
  esac
done
exit $status
