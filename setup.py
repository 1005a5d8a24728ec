"""Builds tfring: libtfring_core.so, the pybind11 module tfring._core and, when TensorFlow
is importable, the TF op library libtfring_tf_ops.so — all placed next to each other in the
tfring package (rpath $ORIGIN), so every process loads exactly one copy of the core.

Build with TensorFlow already installed:  pip install --no-build-isolation -e .
Environment: TFRING_BUILD_JOBS (parallel compiles, default: CPU count),
             TFRING_BUILD_UNITY=0 (compile file by file: faster rebuilds after a one-file
               edit; the default compiles each source folder as one unit, see _units),
             TFRING_WITHOUT_TF=1 (skip the op library), TFRING_DEBUG=1 (-O0 -g),
             TFRING_WITH_NCCL=auto|1|0 (GPU support, see docs/gpu.md):
               auto (default): build the NCCL backend into libtfring_core.so (it needs no CUDA
                 or NCCL headers or libraries at build time: both are opened at run time) and,
                 when the installed TensorFlow is a CUDA build, the GPU kernel library
                 libtfring_tf_gpu_ops.so;
               1: the same, and the GPU kernel library whenever TensorFlow is importable, and
                 fail unless the backend's ABI declarations match the real cuda_runtime_api.h
                 and nccl.h (found under CUDA_HOME, /usr/local/cuda, or the nvidia-* pip
                 packages);
               0: no GPU support at all (GPU tensors fail with UnimplementedError).
"""

import concurrent.futures
import glob
import os
import shlex
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# cc/core is one folder per layer (docs/architecture.md); the NCCL backend is optional.
CORE_DIR = os.path.join(ROOT, "cc", "core")
NCCL_DIR = os.path.join(CORE_DIR, "backends", "nccl")
CORE_SOURCES = sorted(glob.glob(os.path.join(CORE_DIR, "*", "*.cc")))
NCCL_ABI_CHECK = os.path.join(NCCL_DIR, "abi_check.cc")
NCCL_SOURCES = sorted(s for s in glob.glob(os.path.join(NCCL_DIR, "*.cc")) if s != NCCL_ABI_CHECK)
TF_GPU_SOURCES = sorted(glob.glob(os.path.join(ROOT, "cc", "tf_gpu", "*.cc")))
PY_SOURCES = sorted(glob.glob(os.path.join(ROOT, "cc", "python", "*.cc")))
# The TF op library: kernels (cc/tf/) and their XLA lowerings and handlers (cc/tf/xla/).
TF_SOURCES = sorted(glob.glob(os.path.join(ROOT, "cc", "tf", "*.cc")) +
                    glob.glob(os.path.join(ROOT, "cc", "tf", "xla", "*.cc")))
# The headers each library's sources can include: a change rebuilds that library only.
CORE_HEADER_DIRS = [CORE_DIR]
TF_HEADER_DIRS = CORE_HEADER_DIRS + [os.path.join(ROOT, "cc", "tf")]

CXX = os.environ.get("CXX", "g++")
OPT = ["-O0", "-g"] if os.environ.get("TFRING_DEBUG") == "1" else ["-O3"]
# -I cc/core: every include of a core header names its layer folder ("base/status.h").
BASE_FLAGS = ["-std=c++17", "-fPIC", "-fvisibility=default", "-Wall", "-Wno-unused-parameter",
              "-I" + CORE_DIR] + OPT


def _run(cmd):
    print(" ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.check_call(cmd)


def _link_shared(out, objs, libs):
    """Links the shared library `out`. Every library keeps the symbols of static archives
    inside itself (--exclude-libs): a toolchain that links its C++ runtime statically (as
    some custom GCCs do) would otherwise export a private libstdc++ from each library, and
    two copies in one process disagree on locale ids, crashing the first `ostream << number`
    (seen on a GPU machine's /opt/gcc)."""
    _run([CXX, "-shared", "-o", out] + objs + libs + ["-pthread", "-Wl,--exclude-libs,ALL"])


def _newest_header_mtime(header_dirs):
    headers = [h for d in header_dirs for h in glob.glob(os.path.join(d, "**", "*.h"), recursive=True)]
    return max((os.path.getmtime(h) for h in headers), default=0)


def _write_if_changed(path, text):
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def _units(sources, obj_dir):
    """[(file to compile, its object, the sources it stands for)]. By default one unit per
    source folder (a generated file that #includes the folder's sources): the files of a
    folder parse the same standard, pybind11 or TensorFlow headers, and parsing is most of
    a compile. Measured 2026-12-05 at -O3: cc/core/transport and cc/core/control, 28 files,
    28.9 -> 13.2 CPU-s. Names local to a file must then differ between the files of a folder
    (a clash is a compile error, not a silent change). TFRING_BUILD_UNITY=0: one unit per file."""
    def obj_of(src):
        return os.path.join(obj_dir, os.path.relpath(src, ROOT).replace(os.sep, "_") + ".o")

    if os.environ.get("TFRING_BUILD_UNITY", "1") == "0":
        return [(src, obj_of(src), [src]) for src in sources]
    folders = {}
    for src in sources:
        folders.setdefault(os.path.dirname(src), []).append(src)
    units = []
    for folder, members in sorted(folders.items()):
        if len(members) == 1:
            units.append((members[0], obj_of(members[0]), members))
            continue
        unity = os.path.join(obj_dir, "unity", os.path.relpath(folder, ROOT).replace(os.sep, "_") + ".cc")
        os.makedirs(os.path.dirname(unity), exist_ok=True)
        _write_if_changed(unity, "".join(f'#include "{m}"\n' for m in members))
        units.append((unity, unity[:-3] + ".o", members))
    return units


def _compile_all(sources, obj_dir, flags, header_dirs):
    """Compiles sources to objects in parallel (_units), skipping the units whose object is
    newer than their sources and every header under `header_dirs`. Returns the objects."""
    os.makedirs(obj_dir, exist_ok=True)
    header_mtime = _newest_header_mtime(header_dirs)
    jobs = []
    for unit, obj, members in _units(sources, obj_dir):
        newest = max([header_mtime] + [os.path.getmtime(f) for f in members + [unit]])
        jobs.append((unit, obj, os.path.exists(obj) and os.path.getmtime(obj) >= newest))
    workers = int(os.environ.get("TFRING_BUILD_JOBS", os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_run, [CXX] + flags + ["-c", src, "-o", obj]) for src, obj, fresh in jobs if not fresh]
        for f in futures:
            f.result()
    return [obj for _, obj, _ in jobs]


def _tf_flags():
    """(compile flags, link flags) of the installed TensorFlow, or None when absent."""
    if os.environ.get("TFRING_WITHOUT_TF") == "1":
        return None
    code = (
        "import tensorflow as tf, json;"
        "print(json.dumps([tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()]))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        print("tfring: TensorFlow not importable; building without the TF op library", flush=True)
        return None
    import json

    compile_flags, link_flags = json.loads(out.strip().splitlines()[-1])
    # XLA's headers (cc/tf/xla/) include highwayhash and farmhash, which the wheel ships
    # under include/external/; the XLA registrars and xla::CustomCall live in
    # libtensorflow_cc.so.2. -Wno-maybe-uninitialized: absl::InlinedVector false positives.
    tf_includes = [f[2:] for f in compile_flags if f.startswith("-I")]
    xla_includes = ["-I" + os.path.join(d, "external", sub) for d in tf_includes
                    for sub in ("highwayhash", "farmhash_archive/src")]
    return (compile_flags + xla_includes + ["-Wno-deprecated-declarations", "-Wno-sign-compare",
                                            "-Wno-maybe-uninitialized"],
            link_flags + ["-l:libtensorflow_cc.so.2"])


def _with_nccl():
    value = os.environ.get("TFRING_WITH_NCCL", "auto").strip().lower()
    if value not in ("auto", "0", "1"):
        sys.exit(f"TFRING_WITH_NCCL must be auto, 0 or 1. Received: {value!r}")
    return value


def _gpu_include_dirs():
    """Directories holding the real cuda_runtime_api.h (+ crt/) and nccl.h, or None."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import gpu_headers
    finally:
        sys.path.pop(0)
    return gpu_headers.find_include_dirs()


def _check_nccl_abi():
    """TFRING_WITH_NCCL=1: compiles abi_check.cc against the real headers (fails the build on drift)."""
    dirs = _gpu_include_dirs()
    if dirs is None:
        sys.exit("TFRING_WITH_NCCL=1 but cuda_runtime_api.h (with crt/host_defines.h) and nccl.h were not "
                 "found; install the header packages (make gpu-headers) or set CUDA_HOME, or use "
                 "TFRING_WITH_NCCL=auto, which needs no headers")
    _run([CXX, "-std=c++17", "-fsyntax-only", "-I" + CORE_DIR] + ["-I" + d for d in dirs] + [NCCL_ABI_CHECK])


def _tf_is_cuda_build():
    code = "import tensorflow as tf; print(int(tf.test.is_built_with_cuda()))"
    try:
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    return out.strip().endswith("1")


EXTRA_LIBS = ["libtfring_core.so", "libtfring_tf_ops.so", "libtfring_tf_gpu_ops.so"]


class BuildTfring(build_ext):
    def copy_extensions_to_source(self):
        # In-place / editable builds. setuptools would copy only the extension module, and
        # over the old file in place (which crashes every process that mapped it). Copy the
        # module and the libraries it links with ($ORIGIN rpath) to a temporary name, then
        # rename over the old file: running processes keep their valid mapping.
        import shutil

        build_pkg = os.path.join(os.path.abspath(self.build_lib), "tfring")
        module = os.path.basename(self.get_ext_filename("tfring._core"))
        for name in [module] + EXTRA_LIBS:
            src = os.path.join(build_pkg, name)
            if os.path.exists(src):
                dst = os.path.join(ROOT, "tfring", name)
                shutil.copy2(src, dst + ".tmp")
                os.replace(dst + ".tmp", dst)

    def build_extension(self, ext):
        out_path = self.get_ext_fullpath(ext.name)
        pkg_dir = os.path.dirname(os.path.abspath(out_path))
        os.makedirs(pkg_dir, exist_ok=True)
        obj_root = os.path.join(ROOT, "build", "obj")

        core_lib = os.path.join(pkg_dir, "libtfring_core.so")
        with_nccl = _with_nccl()
        if with_nccl == "1":
            _check_nccl_abi()
        core_sources = CORE_SOURCES + (NCCL_SOURCES if with_nccl != "0" else [])
        core_objs = _compile_all(core_sources, os.path.join(obj_root, "core"), BASE_FLAGS, CORE_HEADER_DIRS)
        # -ldl: the NCCL backend opens libnccl/libcudart at run time (no link-time CUDA).
        _link_shared(core_lib, core_objs, ["-lcrypto", "-ldl", "-Wl,-soname,libtfring_core.so"])

        import pybind11

        py_flags = BASE_FLAGS + ["-fvisibility=hidden", "-I" + pybind11.get_include(),
                                 "-I" + sysconfig.get_paths()["include"]]
        py_objs = _compile_all(PY_SOURCES, os.path.join(obj_root, "python"), py_flags,
                               CORE_HEADER_DIRS + [os.path.join(ROOT, "cc", "python")])
        _link_shared(out_path, py_objs, ["-L" + pkg_dir, "-ltfring_core", "-Wl,-rpath,$ORIGIN"])

        tf = _tf_flags()
        if tf is not None and TF_SOURCES:
            tf_compile, tf_link = tf
            tf_objs = _compile_all(TF_SOURCES, os.path.join(obj_root, "tf"), BASE_FLAGS + tf_compile, TF_HEADER_DIRS)
            _link_shared(os.path.join(pkg_dir, "libtfring_tf_ops.so"), tf_objs,
                         ["-L" + pkg_dir, "-ltfring_core", "-Wl,-rpath,$ORIGIN"] + tf_link)
            # GPU kernels: a separate library, loaded by tfring.tensorflow only when TF sees a
            # GPU. It needs TF's headers only (no CUDA headers: see cc/tf_gpu/stream_order.h).
            gpu_lib = os.path.join(pkg_dir, "libtfring_tf_gpu_ops.so")
            if TF_GPU_SOURCES and (with_nccl == "1" or (with_nccl == "auto" and _tf_is_cuda_build())):
                gpu_objs = _compile_all(TF_GPU_SOURCES, os.path.join(obj_root, "tf_gpu"), BASE_FLAGS + tf_compile,
                                        TF_HEADER_DIRS + [os.path.join(ROOT, "cc", "tf_gpu")])
                _link_shared(gpu_lib, gpu_objs,
                             ["-L" + pkg_dir, "-ltfring_tf_ops", "-ltfring_core", "-Wl,-rpath,$ORIGIN"] + tf_link)
            elif os.path.exists(gpu_lib):
                os.remove(gpu_lib)  # never leave a stale GPU library beside a new build


setup(
    name="tfring",
    version="0.1.0",
    description="Ring-allreduce data-parallel training for TensorFlow 2 and Keras 3",
    packages=find_packages(include=["tfring", "tfring.*"]),
    ext_modules=[Extension("tfring._core", sources=[])],
    cmdclass={"build_ext": BuildTfring},
    python_requires=">=3.9",
    install_requires=["numpy", "ml_dtypes", "libcst"],
    extras_require={"tf": ["tensorflow-cpu==2.21.0", "tensorboard"], "ray": ["ray[train]>=2.60,<2.61"]},
    entry_points={"console_scripts": ["tfringrun = tfring.runner.launch:main",
                                    "tfring-migrate = tfring.migrate:main"]},
    zip_safe=False,
)
