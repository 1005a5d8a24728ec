// Drives the CUDA side of tfring's XLA custom calls (cc/tf_gpu/xla_cuda_calls.h: what the
// CUDA FFI handlers call once they decoded XLA's call frame) through the core's NCCL
// backend, on tests/fake_gpu's libraries, in one process of one rank. Built and run by
// tests/test_xla_cuda_fake.py, which reads the fake libraries' ordering log
// (FAKE_CUDA_EVENT_LOG) and this program's output lines.
//
//   xla_cuda_order ok        allreduce of one tensor, then a grouped allreduce of two
//                            (fused: copies on the NCCL stream); checks the results
//   xla_cuda_order before    a request the core refuses at enqueue (bool Average): Start
//                            fails; then one the NCCL backend refuses before any device work
//                            (host memory submitted as GPU:0): Done returns the error and
//                            XLA's stream never waits on a done event
//   xla_cuda_order after     the collective fails after it reached the NCCL stream and after
//                            Done returned (run with FAKE_CUDA_HANG, FAKE_NCCL_ASYNC_ERROR and
//                            FAKE_NCCL_ASYNC_ERROR_DELAY_MS): Done succeeds and the next
//                            Start returns the error
// Output: "xla_stream S<n>", then per call "<what>: <status>", "values: ..." lines. Exit
// code 2 when a call of "ok" failed or a result is wrong. Also runs on a real GPU with the
// real CUDA runtime and NCCL (one rank; modes ok and before): tools/gpu_device_check.sh.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../../cc/tf/xla/inflight.h"
#include "../../cc/tf_gpu/xla_cuda_calls.h"
#include "backends/nccl/gpu_libraries.h"
#include "control/collective_attrs.h"
#include "runtime/runtime.h"

using namespace tfring;

namespace {

const gpu::CudaApi* cuda = nullptr;

bool Print(const std::string& what, const Status& st) {
  std::printf("%s: %s\n", what.c_str(), st.ok() ? "OK" : st.ToString().c_str());
  std::fflush(stdout);
  return st.ok();
}

// A GPU tensor of `n` values (fake device memory) and the submission reading/writing it.
struct Tensor {
  std::vector<float> host;
  void* in = nullptr;
  void* out = nullptr;
};

Submission Make(const std::string& name, Tensor* t, size_t n, float base, DataType dtype, ReduceOp op) {
  t->host.resize(n);
  for (size_t i = 0; i < n; ++i) t->host[i] = base + static_cast<float>(i);
  const size_t bytes = n * 4;
  cuda->cudaMalloc(&t->in, bytes);
  cuda->cudaMalloc(&t->out, bytes);
  cuda->cudaMemcpy(t->in, t->host.data(), bytes, gpu::cudaMemcpyHostToDevice);
  CollectiveAttrs attrs;
  attrs.op = OpType::kAllreduce;
  attrs.reduce_op = op;
  attrs.device = 0;
  Submission s;
  s.request = attrs.MakeRequest(name, dtype, {static_cast<int64_t>(dtype == DataType::kBool ? n * 4 : n)});
  s.input = t->in;
  s.output = t->out;
  return s;
}

bool all_ok = true;  // "ok" mode: every call succeeded and every result is right (exit code)

void PrintValues(const Tensor& t) {
  std::vector<float> got(t.host.size());
  cuda->cudaMemcpy(got.data(), t.out, got.size() * 4, gpu::cudaMemcpyDeviceToHost);
  std::string line = "values:";
  for (float v : got) line += " " + std::to_string(static_cast<int>(v));
  std::printf("%s\n", line.c_str());
  all_ok = all_ok && got == t.host;  // one rank: Sum is the identity
}

void WaitIdle() { tf_ops::InflightTable::Global().WaitUntilIdle(60); }

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  Status st = Runtime::Global().Init({});
  Print("init", st);
  if (!st.ok()) return 1;
  st = gpu::LoadCuda(&cuda);
  Print("cuda", st);
  if (!st.ok()) return 1;
  gpu::cudaStream_t xla_stream = nullptr;  // XLA's compute stream, as the FFI context gives it
  cuda->cudaStreamCreateWithFlags(&xla_stream, 0);
  std::printf("xla_stream S1\n");

  if (mode == "ok") {
    Tensor a;
    std::vector<Submission> one;
    one.push_back(Make("a", &a, 8, 1, DataType::kFloat32, ReduceOp::kSum));
    all_ok = Print("start a", tf_gpu::xla_cuda::Start("a", xla_stream, 0, std::move(one), {})) && all_ok;
    all_ok = Print("done a", tf_gpu::xla_cuda::Done("a", xla_stream)) && all_ok;
    WaitIdle();
    PrintValues(a);
    Tensor b, c;
    std::vector<Submission> two;
    two.push_back(Make("b", &b, 4, 10, DataType::kFloat32, ReduceOp::kSum));
    two.push_back(Make("c", &c, 4, 20, DataType::kFloat32, ReduceOp::kSum));
    all_ok = Print("start b", tf_gpu::xla_cuda::Start("b", xla_stream, 0, std::move(two), {})) && all_ok;
    all_ok = Print("done b", tf_gpu::xla_cuda::Done("b", xla_stream)) && all_ok;
    WaitIdle();
    PrintValues(b);
    PrintValues(c);
  } else if (mode == "before") {
    // Refused at enqueue: the start call fails (XLA then never runs the done call).
    Tensor a;
    std::vector<Submission> one;
    one.push_back(Make("flags", &a, 2, 1, DataType::kBool, ReduceOp::kAverage));
    Print("start flags", tf_gpu::xla_cuda::Start("flags", xla_stream, 0, std::move(one), {}));
    // Accepted, then refused by the NCCL backend before any device work (its memory is not
    // GPU memory): the done call fails.
    Tensor h;
    std::vector<Submission> host;
    host.push_back(Make("host", &h, 4, 1, DataType::kFloat32, ReduceOp::kSum));
    host[0].input = h.host.data();
    Print("start host", tf_gpu::xla_cuda::Start("host", xla_stream, 0, std::move(host), {}));
    Print("done host", tf_gpu::xla_cuda::Done("host", xla_stream));
  } else if (mode == "after") {
    Tensor a, b;
    std::vector<Submission> one;
    one.push_back(Make("a", &a, 8, 1, DataType::kFloat32, ReduceOp::kSum));
    Print("start a", tf_gpu::xla_cuda::Start("a", xla_stream, 0, std::move(one), {}));
    Print("done a", tf_gpu::xla_cuda::Done("a", xla_stream));
    WaitIdle();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the notifier retires 'a'
    std::vector<Submission> next;
    next.push_back(Make("b", &b, 8, 1, DataType::kFloat32, ReduceOp::kSum));
    Print("start b", tf_gpu::xla_cuda::Start("b", xla_stream, 0, std::move(next), {}));
  }
  Runtime::Global().Shutdown();
  std::printf("exit\n");
  return all_ok ? 0 : 2;
}
