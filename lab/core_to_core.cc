// Core-to-core latency: two threads pinned to CPUs A and B pass a token through one cache
// line (each waits for the other's value, then writes its own). Prints the one-way latency
// in nanoseconds (round trip / 2, median of 21 rounds of 20,000 round trips).
// Used by benchmarks/bandwidth_modes.py to tell per-launch modes of a VM apart: cache lines
// that cross a host socket (or a busy host core) move several times slower.
//   g++ -O2 -pthread lab/core_to_core.cc -o build/core_to_core && build/core_to_core 0 1
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {
alignas(64) std::atomic<int> g_token{0};
constexpr int kRoundTrips = 20000;

void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// The side that answers: waits for an odd value, writes the next even one.
void Echo(int cpu, int rounds) {
  Pin(cpu);
  for (int i = 0; i < rounds * kRoundTrips; ++i) {
    const int want = 2 * i + 1;
    while (g_token.load(std::memory_order_acquire) != want) {
    }
    g_token.store(want + 1, std::memory_order_release);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int a = argc > 1 ? std::atoi(argv[1]) : 0, b = argc > 2 ? std::atoi(argv[2]) : 1;
  constexpr int kRounds = 21;
  std::thread echo(Echo, b, kRounds);
  Pin(a);
  std::vector<double> one_way_ns;
  int value = 0;
  for (int r = 0; r < kRounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRoundTrips; ++i) {
      g_token.store(++value, std::memory_order_release);
      ++value;
      while (g_token.load(std::memory_order_acquire) != value) {
      }
    }
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    one_way_ns.push_back(took.count() / kRoundTrips / 2);
  }
  echo.join();
  std::sort(one_way_ns.begin(), one_way_ns.end());
  std::printf("%.1f\n", one_way_ns[kRounds / 2]);
  return 0;
}
