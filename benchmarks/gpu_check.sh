#!/usr/bin/env bash
# benchmarks/gpu_check.py on the GPU machine (device_setup.sh installs the wheels it
# lacks and restores the kernel cache); saves the cache to --out for the next run.
#
#   benchmarks/gpu_check.sh --out "$OUT" --budget 540 [--sections ...]
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_setup.sh
python3 benchmarks/gpu_check.py "$@"
status=$?
save_kernel_cache "$(out_of gpu_check_out "$@")"
exit $status
