python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit
export PYTHONUNBUFFERED=1
nproc
COMMIT=$(git rev-parse --short HEAD 2>/dev/null) PYTEST_ADDOPTS="-n 12 --dist load -rfE --durations=15" timeout 560 bash benchmarks/gpu_run.sh tests > /dev/null 2>&1
echo "rc $?"
tail -60 $OUT/gpu_tests.log
