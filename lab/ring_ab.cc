// A/B of the shared-memory transport: the ring allreduce (float32 sum) between NP real
// processes (forked, rendezvous on an in-process TCP store), alternating ring-only and
// single-copy (TFRING_SHM_CMA) iterations in the same processes and buffers, so machine
// noise hits both alike. Prints rank 0's median per size: transport only, no runtime.
// Build from the repository root after `setup.py build_ext` (which leaves the objects):
//   g++ -std=c++17 -O2 -Icc/core lab/ring_ab.cc build/obj/core/*.o -o /tmp/ring_ab \
//       -lcrypto -pthread -lrt -ldl
// Run: /tmp/ring_ab NP MIN_BYTES ITERS HUGE SIZE... (HUGE=1: buffers on transparent huge
// pages), e.g. /tmp/ring_ab 2 1048576 40 1 4194304 16777216 67108864
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "collectives/collectives.h"
#include "transport/communicator.h"
#include "rendezvous/tcp_store.h"
using namespace tfring;
int main(int argc, char** argv) {
  int np = atoi(argv[1]);
  size_t thr = strtoull(argv[2], nullptr, 10);
  int iters = atoi(argv[3]);
  bool huge = atoi(argv[4]);
  std::vector<size_t> sizes;
  for (int i = 5; i < argc; ++i) sizes.push_back(strtoull(argv[i], nullptr, 10));
  TcpStoreServer server;
  if (!server.Start("127.0.0.1", 0, "s").ok()) return 1;
  int port = server.port();
  std::vector<pid_t> kids;
  for (int r = 0; r < np; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      std::unique_ptr<TcpStoreClient> store;
      if (!TcpStoreClient::Connect("127.0.0.1", port, "s", 10, 10, &store).ok()) _exit(2);
      CommunicatorOptions o;
      o.rank = r; o.size = np; o.secret = "s"; o.cma = CmaMode::kOn; o.cma_min_bytes = thr;
      o.host_id = "h"; o.timeout_s = 60;
      std::unique_ptr<Communicator> comm;
      Status st = Communicator::Create(o, *store, &comm);
      if (!st.ok()) { fprintf(stderr, "%s\n", st.ToString().c_str()); _exit(3); }
      size_t maxb = *std::max_element(sizes.begin(), sizes.end());
      auto alloc = [&](size_t b) {
        void* p = nullptr; posix_memalign(&p, 2 << 20, b);
        if (huge) madvise(p, b, MADV_HUGEPAGE);
        memset(p, 1, b); return static_cast<float*>(p); };
      float* in = alloc(maxb); float* buf = alloc(maxb);
      for (size_t b : sizes) {
        std::vector<double> t[2];
        for (int it = 0; it < iters + 4; ++it) {
          int mode = it % 2;
          for (int p = 0; p < np; ++p) if (p != r) comm->data(p).cma_min_bytes = mode ? thr : SIZE_MAX;
          memcpy(buf, in, b);
          auto t0 = std::chrono::steady_clock::now();
          st = RingAllreduce(*comm, buf, b / 4, DataType::kFloat32, ReduceOp::kSum, 262144);
          double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (!st.ok()) { fprintf(stderr, "%s\n", st.ToString().c_str()); _exit(4); }
          if (it >= 4) t[mode].push_back(s);
        }
        if (r == 0) {
          double m[2];
          for (int k = 0; k < 2; ++k) { std::sort(t[k].begin(), t[k].end()); m[k] = t[k][t[k].size() / 2]; }
          double f = 2.0 * (np - 1) / np / 1e9;
          printf("np=%d %9zu B  ring %8.1f us %6.2f GB/s | cma %8.1f us %6.2f GB/s | x%.2f\n", np, b,
                 m[0] * 1e6, b / m[0] * f, m[1] * 1e6, b / m[1] * f, m[0] / m[1]);
          fflush(stdout);
        }
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  int rc = 0;
  for (pid_t k : kids) { int s; waitpid(k, &s, 0); if (!WIFEXITED(s) || WEXITSTATUS(s)) rc = 1; }
  server.Stop();
  return rc;
}
