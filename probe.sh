set -x
export PYTHONUNBUFFERED=1
( PYTEST_ADDOPTS="-k 'row_ranges or auto_runs_the_row_ranges or inverted_slabs'" GPU_TESTS="-rfE $PWD/tests/gpu/test_strategies_gpu.py $PWD/tests/gpu/test_memory_gpu.py" bash benchmarks/gpu_run.sh tests ) 2>&1 | tail -40
bash benchmarks/cuvs/device.sh stash .dev-cuvs1 >/dev/null && bash benchmarks/cuvs/device.sh assemble 2>&1 | tail -3
COMMIT=100ab51 CUVS_ARGS="--repeats 3 --datasets edgar --knn-datasets=" bash benchmarks/gpu_run.sh cuvs > /dev/null 2>&1
grep -A40 "^edgar braycurtis" $OUT/public_api_cuvs.log | head -40
mv $OUT/public_api_cuvs_h200.json $OUT/public_api_cuvs_h200_100ab51_edgar.json; mv $OUT/public_api_cuvs.log $OUT/public_api_cuvs_h200_100ab51_edgar.log
