"""CUDA runtime and NCCL headers for compile-checking tfring's GPU path (no GPU needed).

tfring's NCCL backend declares the slice of the CUDA/NCCL ABI it uses itself
(cc/core/backends/nccl/gpu_abi.h), so building needs no headers. This tool provides the vendor
headers that cc/core/backends/nccl/abi_check.cc compares those declarations with:

    python tools/gpu_headers.py fetch   # downloads the header packages, keeps include/ only
    python tools/gpu_headers.py flags   # prints -I flags (exit 1 when not found)
    python tools/gpu_headers.py load-check LIB   # LIB registers a GPU kernel for every op and
                                                 # the XLA CUDA handlers

``fetch`` runs ``pip download --no-deps`` (the ordinary client; no install) into a temporary
folder, extracts only the include/ trees into build/gpu-headers/<set>/ and deletes the wheels.
Sets (HEADER_SETS; choose with TFRING_GPU_HEADERS=cuda13|cuda12, default cuda13):
  cuda13: nvidia-cuda-runtime + nvidia-cuda-crt + nvidia-cuda-cccl (CUDA 13, ~6.8 MB) and
          nvidia-nccl-cu12==2.19.3 (the smallest NCCL wheel, 166 MB; only nccl.h is kept);
  cuda12: the CUDA 12.9 headers TF 2.21's CUDA build matches (runtime, nvcc for crt/, cccl:
          ~47 MB) and the same NCCL.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "build", "gpu-headers")
NCCL_PACKAGE = "nvidia-nccl-cu12==2.19.3"
HEADER_SETS = {
    "cuda13": ["nvidia-cuda-runtime==13.*", "nvidia-cuda-crt==13.*", "nvidia-cuda-cccl==13.*", NCCL_PACKAGE],
    "cuda12": ["nvidia-cuda-runtime-cu12==12.9.*", "nvidia-cuda-nvcc-cu12==12.9.*", "nvidia-cuda-cccl-cu12==12.9.*",
               NCCL_PACKAGE],
}


def _header_set():
    name = os.environ.get("TFRING_GPU_HEADERS", "cuda13")
    if name not in HEADER_SETS:
        sys.exit(f"TFRING_GPU_HEADERS must be one of {sorted(HEADER_SETS)}. Received: {name!r}")
    return name


def _dirs_with(root, name):
    """Include directories under root from which `name` (a relative path) resolves."""
    return sorted({p[: -len(name)].rstrip("/") for p in glob.glob(os.path.join(root, "**", name), recursive=True)})


def _complete(dirs):
    """True when `dirs` (-I order) provide everything nccl.h + cuda_runtime_api.h include."""
    need = ["cuda_runtime_api.h", "crt/host_defines.h", "crt/host_config.h", "nccl.h", "nv/target"]
    return all(any(os.path.exists(os.path.join(d, n)) for d in dirs) for n in need)


def _cached_dirs(set_name):
    root = os.path.join(CACHE, set_name)
    if not os.path.isdir(root):
        return None
    dirs = []
    for name in ["cuda_runtime_api.h", "crt/host_defines.h", "nccl.h", "nv/target"]:
        for d in _dirs_with(root, name):
            if d not in dirs:
                dirs.append(d)
    return dirs if _complete(dirs) else None


def find_include_dirs():
    """-I directories with the vendor headers, or None. Looks at CUDA_HOME (with nccl.h
    there or in /usr/include), then the fetched cache (TFRING_GPU_HEADERS set first)."""
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        inc = os.path.join(cuda_home, "include")
        dirs = [inc, os.path.join(inc, "cccl")] + [d for d in ["/usr/include"] if os.path.exists(d + "/nccl.h")]
        if _complete(dirs):
            return dirs
    preferred = _header_set()
    for name in [preferred] + [n for n in HEADER_SETS if n != preferred]:
        dirs = _cached_dirs(name)
        if dirs:
            return dirs
    return None


def fetch(set_name):
    """Downloads and extracts the header set (skipped when already extracted)."""
    if _cached_dirs(set_name):
        print(f"gpu-headers: {set_name} headers already in {os.path.join(CACHE, set_name)}")
        return
    dest = os.path.join(CACHE, set_name)
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="tfring-gpu-headers-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp] + HEADER_SETS[set_name]
        print("gpu-headers: " + " ".join(cmd[3:]), flush=True)
        subprocess.check_call(cmd)
        total = 0
        for wheel in sorted(glob.glob(os.path.join(tmp, "*.whl"))):
            total += os.path.getsize(wheel)
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    if "/include/" in info.filename and not info.filename.endswith("/"):
                        z.extract(info, dest)
        print(f"gpu-headers: downloaded {total / 1e6:.1f} MB, kept the include/ trees in {dest}")
    if not _cached_dirs(set_name):
        sys.exit(f"gpu-headers: the {set_name} packages did not provide every header needed")


def load_check(library):
    """Loads tfring's TF op library, then the GPU kernel `library`; every tfring op must have
    a GPU kernel and the XLA CUDA handlers must have registered (works with TF's CPU build
    too: neither registration needs a GPU)."""
    sys.path.insert(0, ROOT)
    import tensorflow as tf
    from tensorflow.python.framework import kernels

    from tfring._tensorflow import _loader

    ops = [name for name in dir(_loader.op_library()) if not name.startswith("_")]
    tf.load_op_library(os.path.abspath(library))
    missing = []
    for op in ["TfringAllreduce", "TfringGroupedAllreduce", "TfringAllgather", "TfringBroadcast",
               "TfringAlltoall", "TfringReducescatter", "TfringBarrier"]:
        devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
        if "GPU" not in devices:
            missing.append(op)
    if missing:
        sys.exit(f"gpu load-check: no GPU kernel for {missing} (op library exports {len(ops)} names)")
    # The XLA:GPU custom-call handlers (cc/tf_gpu/xla_cuda_handlers.cc) registered on TF's
    # XLA FFI registry for platform "CUDA" when the library loaded ("" = registered).
    import ctypes

    registration = ctypes.CDLL(os.path.abspath(library)).tfring_xla_cuda_registration
    registration.restype = ctypes.c_char_p
    failure = registration().decode()
    if failure:
        sys.exit(f"gpu load-check: the XLA CUDA handlers did not register: {failure}")
    print(f"gpu load-check: {library} loaded; every tfring op has a GPU kernel; the XLA CUDA handlers "
          "registered for platform CUDA")


def main(argv):
    if len(argv) == 3 and argv[1] == "load-check":
        load_check(argv[2])
        return 0
    if argv[1:] == ["fetch"]:
        fetch(_header_set())
        return 0
    if argv[1:] == ["flags"]:
        dirs = find_include_dirs()
        if dirs is None:
            print("gpu-headers: not found; run `python tools/gpu_headers.py fetch`", file=sys.stderr)
            return 1
        print(" ".join("-I" + d for d in dirs))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
