#include "backends/nccl/gpu_libraries.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "base/config.h"
#include "base/logging.h"

namespace tfring {
namespace gpu {
namespace {

struct LibrarySpec {
  const char* what;           // "NCCL"
  const char* setting;        // "TFRING_NCCL_LIBRARY"
  std::vector<const char*> sonames;
  std::vector<const char*> pip_dirs;  // relative to a site-packages root
  const char* how_to_get;
};

const LibrarySpec kNccl = {
    "NCCL",
    "TFRING_NCCL_LIBRARY",
    {"libnccl.so.2"},
    {"nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"},
    "install it with `pip install nvidia-nccl-cu12` (CUDA 12; nvidia-nccl-cu13 for CUDA 13) "
    "or your distribution's libnccl2, or set TFRING_NCCL_LIBRARY=/path/to/libnccl.so.2"};

const LibrarySpec kCudaRuntime = {
    "the CUDA runtime",
    "TFRING_CUDA_RUNTIME_LIBRARY",
    {"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"},
    {"nvidia/cuda_runtime/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"},
    "install it with `pip install nvidia-cuda-runtime-cu12` (or the CUDA toolkit), or set "
    "TFRING_CUDA_RUNTIME_LIBRARY=/path/to/libcudart.so.12"};

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Parent(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// site-packages of this very libtfring_core.so (…/site-packages/tfring/libtfring_core.so).
std::string OwnSitePackages() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&OwnSitePackages), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  return Parent(Parent(info.dli_fname));
}

// The runtime's configured value (init(...) arguments win over the environment), else the
// environment's (GPU queries made before init()).
std::string ConfiguredSetting(const char* name) {
  std::string path;
  if (ConfiguredGpuLibraryPath(name, &path)) return path;
  Config config;  // the one place the core reads the environment
  if (!Config::Load({}, /*read_env=*/true, &config).ok()) return "";
  return config.String(name);
}

// Opens the library described by `spec`; `resolve` looks up every symbol and returns an
// error naming the first one missing. Returns the handle's path in *path.
template <typename Resolve>
Status OpenLibrary(const LibrarySpec& spec, Resolve resolve, std::string* path) {
  std::string tried;
  auto attempt = [&](const std::string& name, int flags) -> bool {
    void* handle = dlopen(name.c_str(), flags);
    if (handle == nullptr) {
      if (!(flags & RTLD_NOLOAD)) {
        const char* err = dlerror();  // names the file already
        tried += "\n  " + (err ? std::string(err) : name + ": not found");
      }
      return false;
    }
    Status st = resolve(handle);
    if (!st.ok()) {
      tried += "\n  " + name + ": " + st.message();
      return false;  // keep the handle: unloading libraries is never safe
    }
    *path = name;
    return true;
  };
  const std::string explicit_path = ConfiguredSetting(spec.setting);
  if (!explicit_path.empty()) {
    if (attempt(explicit_path, RTLD_NOW | RTLD_LOCAL)) return Status::OK();
    return Status::Unimplemented(std::string(spec.what) + " could not be loaded from " + spec.setting + "=" +
                                 explicit_path + " (fix or unset it); " + spec.how_to_get + ". Tried:" + tried);
  }
  for (const char* soname : spec.sonames) {
    if (attempt(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return Status::OK();
  }
  std::vector<std::string> roots;
  std::string own = OwnSitePackages();
  if (!own.empty()) roots.push_back(own);
  for (const auto& r : GpuLibrarySearchRoots()) roots.push_back(r);
  for (const auto& root : roots) {
    for (const char* dir : spec.pip_dirs) {
      for (const char* soname : spec.sonames) {
        std::string candidate = root + "/" + dir + "/" + soname;
        if (FileExists(candidate) && attempt(candidate, RTLD_NOW | RTLD_LOCAL)) return Status::OK();
      }
    }
  }
  for (const char* soname : spec.sonames) {
    if (attempt(soname, RTLD_NOW | RTLD_LOCAL)) return Status::OK();
  }
  return Status::Unimplemented(std::string(spec.what) + " was not found; " + spec.how_to_get +
                               ". Tried:" + tried);
}

#define TFRING_GPU_RESOLVE(name, ret, args)                                        \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, #name));         \
  if (api->name == nullptr) return Status::Unimplemented("has no symbol " #name);

struct Loaded {
  std::once_flag once;
  Status status;
};

}  // namespace

std::string CudaErrorText(const CudaApi& cuda, cudaError_t error) {
  const char* text = cuda.cudaGetErrorString ? cuda.cudaGetErrorString(error) : nullptr;
  return "CUDA error " + std::to_string(static_cast<int>(error)) + (text ? std::string(": ") + text : "");
}

std::string NcclVersionText(int code) {
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

Status LoadCuda(const CudaApi** out) {
  static Loaded loaded;
  static CudaApi api_storage;
  std::call_once(loaded.once, [] {
    CudaApi* api = &api_storage;
    auto resolve = [api](void* handle) -> Status {
      TFRING_CUDA_API(TFRING_GPU_RESOLVE)
      return Status::OK();
    };
    Status st = OpenLibrary(kCudaRuntime, resolve, &api->path);
    if (st.ok()) {
      api->cudaRuntimeGetVersion(&api->runtime_version);
      cudaError_t err = api->cudaGetDeviceCount(&api->device_count);
      if (err != cudaSuccess || api->device_count == 0) {
        api->cudaGetLastError();  // clear the sticky-free error so later calls start clean
        st = Status::Unimplemented(
            "no usable CUDA device (the CUDA runtime " + api->path + " reports " +
            (err != cudaSuccess ? CudaErrorText(*api, err) : std::string("0 devices")) +
            "); check the NVIDIA driver and CUDA_VISIBLE_DEVICES");
      } else {
        TFRING_LOG(LogLevel::kInfo, "gpu", "CUDA runtime " << api->runtime_version << " from "
                                                          << api->path << ", " << api->device_count
                                                          << " device(s)");
      }
    }
    loaded.status = st;
  });
  if (!loaded.status.ok()) return loaded.status;
  *out = &api_storage;
  return Status::OK();
}

Status LoadNccl(const NcclApi** out) {
  static Loaded loaded;
  static NcclApi api_storage;
  std::call_once(loaded.once, [] {
    NcclApi* api = &api_storage;
    auto resolve = [api](void* handle) -> Status {
      TFRING_NCCL_API(TFRING_GPU_RESOLVE)
      int version = 0;
      if (api->ncclGetVersion(&version) != ncclSuccess || version < kMinNcclVersion) {
        return Status::Unimplemented("is NCCL " + NcclVersionText(version) +
                                     "; tfring needs NCCL 2.14 or newer");
      }
      api->version = version;
      return Status::OK();
    };
    Status st = OpenLibrary(kNccl, resolve, &api->path);
    if (st.ok()) {
      TFRING_LOG(LogLevel::kInfo, "gpu", "NCCL " << NcclVersionText(api->version) << " from " << api->path);
    }
    loaded.status = st;
  });
  if (!loaded.status.ok()) return loaded.status;
  *out = &api_storage;
  return Status::OK();
}

}  // namespace gpu
}  // namespace tfring
