#!/usr/bin/env bash
# benchmarks/atari100k_gpu.py on the GPU machine (device_setup.sh installs the wheels it
# lacks and restores the kernel cache); saves the cache to --out for the next run.
#
#   benchmarks/atari100k_gpu.sh --out "$OUT" --budget 540 [--games G,...] [--jobs 8] [-- TRAIN OPTION ...]
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/device_setup.sh
python3 benchmarks/atari100k_gpu.py "$@"
status=$?
save_kernel_cache "$(out_of atari100k_gpu_out "$@")"
exit $status
