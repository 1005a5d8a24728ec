// The GPU backend's registration point (see backend.h). Always compiled; empty unless the
// NCCL backend (cc/core/backends/nccl/) was linked into libtfring_core.so.
#include <map>
#include <mutex>

#include "backends/backend.h"

namespace tfring {
namespace {

GpuSupport*& Registered() {
  static GpuSupport* support = nullptr;
  return support;
}

std::mutex& RootsMutex() {
  static std::mutex mu;
  return mu;
}

std::vector<std::string>& Roots() {
  static std::vector<std::string> roots;
  return roots;
}

std::map<std::string, std::string>& LibraryPaths() {  // guarded by RootsMutex()
  static std::map<std::string, std::string> paths;
  return paths;
}

}  // namespace

GpuSupport* GetGpuSupport() { return Registered(); }

void RegisterGpuSupport(GpuSupport* support) { Registered() = support; }

Status CheckGpuRequest(const Request& r) {
  const std::string what = std::string(OpTypeName(r.attrs.op)) + " of tensor '" + r.name + "' on GPU:" +
                           std::to_string(r.attrs.device);
  GpuSupport* gpu = GetGpuSupport();
  if (gpu == nullptr) {
    return Status::Unimplemented(
        what + ": this build of tfring has no GPU backend (it was built with TFRING_WITH_NCCL=0). "
        "Keep the tensor on the CPU, or reinstall tfring with TFRING_WITH_NCCL=auto and NCCL "
        "available at run time (pip install nvidia-nccl-cu12)");
  }
  Status st = gpu->CheckRequest(r);
  if (!st.ok()) return st.WithContext(what);
  st = gpu->Available();
  if (!st.ok()) return st.WithContext(what);
  return Status::OK();
}

void AddGpuLibrarySearchRoot(const std::string& dir) {
  if (dir.empty()) return;
  std::lock_guard<std::mutex> lock(RootsMutex());
  for (const auto& d : Roots()) {
    if (d == dir) return;
  }
  Roots().push_back(dir);
}

std::vector<std::string> GpuLibrarySearchRoots() {
  std::lock_guard<std::mutex> lock(RootsMutex());
  return Roots();
}

void SetGpuLibraryPath(const std::string& setting, const std::string& path) {
  std::lock_guard<std::mutex> lock(RootsMutex());
  LibraryPaths()[setting] = path;
}

bool ConfiguredGpuLibraryPath(const std::string& setting, std::string* path) {
  std::lock_guard<std::mutex> lock(RootsMutex());
  auto it = LibraryPaths().find(setting);
  if (it == LibraryPaths().end()) return false;
  *path = it->second;
  return true;
}

}  // namespace tfring
