// A CPU stand-in for libcudart, for tests only (tests/test_gpu_nccl.py): lets tfring's NCCL
// backend and the pybind module's GPU arrays run on a machine without a GPU. "Device"
// memory is host memory this library allocated (so cudaPointerGetAttributes can tell it
// from host memory), copies are memmove, streams and events are tokens and complete at
// once. Loaded only through TFRING_CUDA_RUNTIME_LIBRARY.
//
// Fault injection (environment): FAKE_CUDA_DEVICES=n (default 1); FAKE_CUDA_HANG=1 makes
// cudaEventQuery report "not ready" forever (a kernel that never finishes).
// Ordering log: with FAKE_CUDA_EVENT_LOG=path, every cudaEventRecord, cudaStreamWaitEvent
// and cudaMemcpyAsync appends one line, in call order ("record E2 on S1", "wait S3 for E2",
// "copy on S3"); streams and events are numbered in creation order (S1, E1, ... per kind).
// fake_nccl.cc appends its collectives to the same file ("ncclAllReduce on S3"), reading
// the stream's number from the Handle below.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

namespace {

struct Allocation {
  size_t bytes;
  int device;
};

std::mutex mu;
std::map<uintptr_t, Allocation> allocations;  // by base address
thread_local int current_device = 0;

// A stream's or event's handle: its kind ('S' or 'E') and number (fake_nccl.cc reads it).
struct Handle {
  char kind;
  int id;
};
int next_id[2] = {0, 0};

void* NewHandle(char kind) {
  std::lock_guard<std::mutex> lock(mu);
  return new Handle{kind, ++next_id[kind == 'S' ? 0 : 1]};
}

std::string Name(void* handle) {
  if (handle == nullptr) return "S0";  // the legacy default stream
  const Handle* h = static_cast<const Handle*>(handle);
  return std::string(1, h->kind) + std::to_string(h->id);
}

void LogLine(const std::string& line) {
  const char* path = std::getenv("FAKE_CUDA_EVENT_LOG");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(mu);
  std::ofstream(path, std::ios::app) << line << "\n";
}

int DeviceCount() {
  const char* n = std::getenv("FAKE_CUDA_DEVICES");
  return n ? std::atoi(n) : 1;
}

struct PointerAttributes {  // cudaPointerAttributes prefix
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

}  // namespace

extern "C" {

const char* cudaGetErrorString(int error) {
  switch (error) {
    case 0: return "no error";
    case 101: return "invalid device ordinal (fake)";
    case 600: return "device not ready (fake)";
    default: return "fake CUDA error";
  }
}
int cudaGetLastError() { return 0; }
int cudaRuntimeGetVersion(int* v) { *v = 12040; return 0; }
int cudaDriverGetVersion(int* v) { *v = 12040; return 0; }
int cudaGetDeviceCount(int* n) { *n = DeviceCount(); return 0; }
int cudaGetDevice(int* d) { *d = current_device; return 0; }
int cudaSetDevice(int d) {
  if (d < 0 || d >= DeviceCount()) return 101;
  current_device = d;
  return 0;
}

int cudaPointerGetAttributes(PointerAttributes* attr, const void* ptr) {
  std::memset(attr, 0, sizeof(*attr));
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu);
  auto it = allocations.upper_bound(p);
  if (it != allocations.begin()) {
    --it;
    if (p < it->first + (it->second.bytes ? it->second.bytes : 1)) {
      attr->type = 2;  // cudaMemoryTypeDevice
      attr->device = it->second.device;
      attr->devicePointer = const_cast<void*>(ptr);
      return 0;
    }
  }
  attr->type = 0;  // cudaMemoryTypeUnregistered
  attr->device = -2;
  return 0;
}

int cudaMalloc(void** ptr, size_t bytes) {
  *ptr = std::malloc(bytes ? bytes : 1);
  std::lock_guard<std::mutex> lock(mu);
  allocations[reinterpret_cast<uintptr_t>(*ptr)] = Allocation{bytes, current_device};
  return 0;
}

int cudaFree(void* ptr) {
  if (ptr == nullptr) return 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    allocations.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  std::free(ptr);
  return 0;
}

int cudaMemcpy(void* dst, const void* src, size_t bytes, int) {
  if (bytes) std::memmove(dst, src, bytes);
  return 0;
}
int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int, void* stream) {
  LogLine("copy on " + Name(stream));
  if (bytes) std::memmove(dst, src, bytes);
  return 0;
}

int cudaStreamCreateWithFlags(void** stream, unsigned) { *stream = NewHandle('S'); return 0; }
int cudaStreamDestroy(void* stream) { delete static_cast<Handle*>(stream); return 0; }
int cudaStreamSynchronize(void*) { return 0; }
int cudaEventCreateWithFlags(void** event, unsigned) { *event = NewHandle('E'); return 0; }
int cudaEventDestroy(void* event) { delete static_cast<Handle*>(event); return 0; }
int cudaEventRecord(void* event, void* stream) {
  LogLine("record " + Name(event) + " on " + Name(stream));
  return 0;
}
int cudaEventQuery(void*) { return std::getenv("FAKE_CUDA_HANG") ? 600 : 0; }
int cudaStreamWaitEvent(void* stream, void* event, unsigned flags) {
  if (flags != 0) return 1;  // cudaErrorInvalidValue: tfring passes no flags
  LogLine("wait " + Name(stream) + " for " + Name(event));
  return 0;
}

}  // extern "C"
