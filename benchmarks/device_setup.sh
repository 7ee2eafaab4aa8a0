# Sourced by the GPU machine's scripts (gpu_check.sh, atari100k_gpu.sh), from the
# repository root: installs the wheels that ../shared/tools/device-wheels.sh put in .whl/
# (the GPU machine has PyTorch but neither Gymnasium nor ale-py) where they are missing,
# and restores a kernel cache a previous run saved in .gpucache/ (compiling the captured
# graphs then takes seconds, not minutes). `save_kernel_cache DIR` saves it back.
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

save_kernel_cache() {
  if [ -n "$1" ] && [ -d "$1" ] && [ -d /tmp/inductor_cache ]; then
    tar czf /tmp/inductor_cache.tgz -C /tmp/inductor_cache . &&
      [ "$(stat -c %s /tmp/inductor_cache.tgz)" -lt 16000000 ] &&
      cp /tmp/inductor_cache.tgz "$1/inductor_cache.tgz"
  fi
}

# `out_of DEFAULT ARGS...`: the value of --out among ARGS, else $OUT, else DEFAULT.
out_of() {
  local out=${OUT:-$1} i j
  shift
  for ((i = 1; i < $#; i++)); do [ "${!i}" = "--out" ] && j=$((i + 1)) && out=${!j}; done
  echo "$out"
}
