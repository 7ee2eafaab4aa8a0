#!/usr/bin/env bash
# benchmarks/gpu_check.py on the GPU machine, which lacks Gymnasium and ale-py: installs
# the wheels that ../shared/tools/device-wheels.sh put in .whl/ (carried by the device
# call), restores a kernel cache a previous run saved in .gpucache/ (compiling the
# captured graphs then takes seconds, not minutes), runs the checks, and saves the
# cache to $OUT for the next run.
#
#   benchmarks/gpu_check.sh --out "$OUT" --budget 540 [--sections ...]
set -uo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import ale_py, gymnasium" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 2
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor_cache
if [ -f .gpucache/inductor_cache.tgz ]; then
  mkdir -p /tmp/inductor_cache && tar xzf .gpucache/inductor_cache.tgz -C /tmp/inductor_cache
fi
python3 benchmarks/gpu_check.py "$@"
status=$?
out=${OUT:-gpu_check_out}
for ((i = 1; i <= $#; i++)); do [ "${!i}" = "--out" ] && j=$((i + 1)) && out=${!j}; done
if [ -d /tmp/inductor_cache ]; then
  tar czf /tmp/inductor_cache.tgz -C /tmp/inductor_cache . &&
    [ "$(stat -c %s /tmp/inductor_cache.tgz)" -lt 16000000 ] &&
    cp /tmp/inductor_cache.tgz "$out/inductor_cache.tgz"
fi
exit $status
