#!/usr/bin/env bash
# The GPU checks for a lent GPU machine (docs/gpu.md, "Running the GPU test"): one script,
# run from the repo root there, results under $OUT (default /tmp/gpu_out). It needs CUDA,
# NCCL, numpy, pybind11 and pytest on that machine; CuPy for the baseline; no TensorFlow.
#   1. what the machine has (GPU, driver, NCCL/CUDA packages);
#   2. builds tfring without TF (TFRING_WITHOUT_TF=1) on all cores;
#   3. gpu_abi.h against the machine's own cuda_runtime_api.h and nccl.h;
#   4. the `gpu` tests of tests/test_gpu_nccl.py against the real libraries;
#   5. two ranks on ONE GPU: what a user who starts too many processes sees (bounded);
#   6. benchmarks/gpu_collectives.py (tfring vs NCCL through CuPy);
#   7. benchmarks/gpu_soak.py: randomized mixed collectives, every result checked;
#   (after 4) the XLA CUDA handlers' event path (tests/fake_gpu/xla_cuda_order.cc) on the
#      real libraries, one rank, without XLA.
# Every step is bounded by `timeout`; the script goes on after a failed step and exits
# non-zero if any failed.
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
PY=${PY:-python3}
failed=()
step() { echo; echo "=== $1 ($(date +%T))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY --version; nproc
$PY -m pip list 2>/dev/null | grep -iE '^(numpy|pybind11|pytest|cupy|nvidia-nccl|nvidia-cuda-runtime) ' || true
NCCL_H=$($PY - <<'PY'
import glob, os, site
for d in site.getsitepackages():
    hits = glob.glob(os.path.join(d, "nvidia", "**", "include", "nccl.h"), recursive=True)
    if hits:
        print(hits[0]); break
PY
)
echo "nccl.h: ${NCCL_H:-not found}"

step "build (TFRING_WITHOUT_TF=1)"
# libtfring_core links libcrypto (auth.cc): without OpenSSL's headers or the unversioned
# libcrypto.so there, use headers carried in .gpucarry/include and a link to libcrypto.so.3.
if ! echo '#include <openssl/evp.h>' | c++ -E -x c++ - >/dev/null 2>&1; then
  echo "no OpenSSL headers here: using .gpucarry/include"; export CPATH=$PWD/.gpucarry/include
fi
if ! echo 'int main(){}' | c++ -x c++ - -lcrypto -o /tmp/crypto_link_test 2>/dev/null; then
  mkdir -p /tmp/cryptolib
  ln -sf "$(ldconfig -p | awk '/libcrypto.so.3 .*x86-64/ {print $NF; exit}')" /tmp/cryptolib/libcrypto.so
  echo "no libcrypto.so link here: $(readlink /tmp/cryptolib/libcrypto.so)"; export LIBRARY_PATH=/tmp/cryptolib
fi
if ! TFRING_BUILD_JOBS=$(nproc) TFRING_WITHOUT_TF=1 timeout 240 $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
tail -2 "$OUT/build.log"

step "ABI declarations against this machine's headers"
if [ -n "${NCCL_H}" ] && c++ -std=c++17 -fsyntax-only -Icc/core -I/usr/local/cuda/include -I"$(dirname "$NCCL_H")" \
     cc/core/backends/nccl/abi_check.cc; then echo "ABI-OK"; else echo "ABI check failed or nccl.h missing"; failed+=(abi); fi

step "gpu_info"
$PY -c "import tfring._basics.gpu, pprint; pprint.pprint(tfring._basics.gpu.gpu_info())"

step "pytest -m gpu tests/test_gpu_nccl.py"
PYTHONUNBUFFERED=1 timeout 180 $PY -m pytest -q -ra -p no:cacheprovider -m gpu tests/test_gpu_nccl.py \
  "tests/test_gpu_nccl.py::test_nccl_backend_is_built_in_without_link_time_cuda" \
  --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.log" | tail -45
[ "${PIPESTATUS[0]}" = 0 ] || failed+=(pytest)

step "XLA CUDA handler path, real CUDA + NCCL, one rank (tests/fake_gpu/xla_cuda_order.cc; no XLA)"
# What the XLA:GPU FFI handlers call (cc/tf_gpu/xla_cuda_calls.cc): ready event on a stream
# standing for XLA's, NCCL stream waits on it, done event waited on by that stream.
if g++ -std=c++17 -O1 -Icc/core tests/fake_gpu/xla_cuda_order.cc cc/tf_gpu/xla_cuda_calls.cc cc/tf/xla/inflight.cc \
     -Ltfring -ltfring_core -Wl,-rpath,$PWD/tfring -pthread -o "$OUT/xla_cuda_order" >"$OUT/xla_cuda_order.build.log" 2>&1; then
  for mode in ok before; do
    timeout 60 "$OUT/xla_cuda_order" $mode 2>&1 | sed "s/^/$mode: /"
    [ "${PIPESTATUS[0]}" = 0 ] || failed+=(xla_cuda_$mode)
  done
else
  tail -20 "$OUT/xla_cuda_order.build.log"; failed+=(xla_cuda_build)
fi

step "two ranks on one GPU (NCCL refuses them: the error must be clear and quick)"
cat >/tmp/two_on_one.py <<'PY'
import time, numpy as np, tfring
from tfring import _core
tfring.init()
t0 = time.time()
try:
    out = tfring.allreduce(_core.DeviceBuffer.from_numpy(np.ones(4, np.float32), 0), name="dup")
    print("RANK", tfring.rank(), "allreduce on a shared GPU returned", out.to_numpy(), flush=True)
except Exception as e:
    print("RANK", tfring.rank(), f"after {time.time() - t0:.1f}s:", type(e).__name__, str(e)[:600], flush=True)
tfring.shutdown()
PY
PYTHONPATH=$PWD TFRING_TIMEOUT_S=30 timeout 90 $PY -m tfring.runner.launch -np 2 $PY /tmp/two_on_one.py 2>&1 | tail -25
echo "launcher exit: ${PIPESTATUS[0]}"

step "shutdown: NCCL finalize+destroy after a clean job (docs/gpu.md, Shutdown)"
for i in 1 2 3; do
  # the script of tests/test_gpu_nccl.py's shutdown tests: one GPU collective, then a timed shutdown()
  PYTHONPATH=$PWD TFRING_LOG_LEVEL=info timeout 60 $PY -c "import tests.test_gpu_nccl as t; exec(t._SHUTDOWN_SCRIPT)" \
    2>&1 | grep -E "SHUTDOWN|finalized|abort" | sed "s/^/clean $i: /"
done

step "benchmarks/gpu_collectives.py"
PYTHONUNBUFFERED=1 timeout 150 $PY benchmarks/gpu_collectives.py --json "$OUT/gpu_collectives.json" || failed+=(bench)

step "benchmarks/gpu_soak.py (randomized mixed collectives, checked)"
PYTHONUNBUFFERED=1 timeout 90 $PY benchmarks/gpu_soak.py --seconds ${SOAK_SECONDS:-40} --json "$OUT/gpu_soak.json" || failed+=(soak)

step "done; failed steps: ${failed[*]:-none}"
[ ${#failed[@]} = 0 ]
