// The init exchange (roster.h): O(n) store requests, every rank knows every rank's host,
// and a rank that never starts is named on every rank that did, without each waiting out
// its own timeout.
#include "rendezvous/roster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "transport/communicator.h"
#include "rendezvous/memory_store.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using testing_util::RunRanks;

// A MemoryStore that counts the requests made to it (thread-safe, as the store is).
class CountingStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override {
    ++requests;
    return inner_.Set(key, value);
  }
  Status Get(const std::string& key, double timeout_s, std::string* value) override {
    ++requests;
    return inner_.Get(key, timeout_s, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    ++requests;
    return inner_.Add(key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, double timeout_s) override {
    ++requests;
    return inner_.Wait(keys, timeout_s);
  }
  std::atomic<int64_t> requests{0};

 private:
  MemoryStore inner_;
};

TEST(RosterTest, InitMakesLinearStoreRequestsAndEveryRankKnowsEveryHost) {
  for (int n : {2, 5, 9}) {
    auto store = std::make_shared<CountingStore>();
    MeshOptions o;
    o.size = n;
    o.ranks_per_host = 2;
    o.store = store;
    Mesh mesh;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    // n-1 entries published, read by rank 0, one roster published and read n-1 times.
    EXPECT_EQ(store->requests.load(), 3 * n - 2) << n << " ranks";
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        EXPECT_EQ(mesh[r].host_ids()[p], "test-host-" + std::to_string(p / 2)) << r << " about " << p;
        EXPECT_EQ(mesh[r].hostname_of(p), "host" + std::to_string(p)) << r << " about " << p;
      }
    }
  }
}

// Shared-memory rings between the ranks of a host: a constant number of store requests per
// rank (the ring names follow from the roster), not a few per local peer (64 ranks on one
// host made ~20,000 requests and took ~1 s longer to init than TCP, lab/records/scaling.md).
TEST(RosterTest, SharedMemoryRingsCostFourStoreRequestsPerRankWhateverTheLocalPeers) {
  for (auto [n, per_host] : {std::pair{8, 8}, std::pair{9, 4}}) {
    auto store = std::make_shared<CountingStore>();
    MeshOptions o;
    o.size = n;
    o.ranks_per_host = per_host;
    o.shm = true;
    o.store = store;
    Mesh mesh;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    int with_local_peers = 0;
    for (int r = 0; r < n; ++r) {
      const int host_size = std::min(per_host, n - r / per_host * per_host);
      EXPECT_EQ(mesh[r].shm_peers(), host_size - 1) << r;
      with_local_peers += host_size > 1 ? 1 : 0;
    }
    EXPECT_EQ(store->requests.load(), (3 * n - 2) + 4 * with_local_peers) << n << " ranks, " << per_host << " per host";
  }
}

TEST(RosterTest, ARankThatNeverStartsIsNamedOnEveryRankAtRankZerosTimeout) {
  MemoryStore store;
  RosterEntry entry;
  entry.address = "127.0.0.1:1";
  const auto start = std::chrono::steady_clock::now();
  // Ranks 0, 1 and 3 of 5 start; 2 and 4 never do.
  auto statuses = RunRanks(3, 20, [&](int i) {
    const int rank = i == 2 ? 3 : i;
    std::vector<RosterEntry> all;
    return ExchangeRoster(rank, 5, entry, store, Deadline::After(i == 0 ? 1.0 : 15.0), &all);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& st : statuses) {
    EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"from rank(s) 2, 4: never started", "5 ranks expected"})) << st.ToString();
  }
  EXPECT_LT(seconds, 10) << "the others waited for their own deadline instead of rank 0's verdict";
}

TEST(RosterTest, SettingsThatMustMatchFailEveryRankNamingTheOddOne) {
  MemoryStore store;
  auto statuses = RunRanks(3, 20, [&](int rank) {
    RosterEntry entry;
    entry.address = "127.0.0.1:1";
    entry.must_match = rank == 2 ? "TFRING_SHM=0" : "TFRING_SHM=1";
    std::vector<RosterEntry> all;
    return ExchangeRoster(rank, 3, entry, store, Deadline::After(10), &all);
  });
  for (const auto& st : statuses) {
    EXPECT_TRUE(HasError(st, ErrorCode::kInvalidArgument, {"rank 2 has 'TFRING_SHM=0'", "rank 0 has 'TFRING_SHM=1'"}))
        << st.ToString();
  }
}

TEST(RosterTest, EntriesRoundTripAndGarbageIsRefused) {
  RosterEntry e;
  e.address = "[::1]:4242";
  e.host_id = "h/boot/3";
  e.hostname = "node-7";
  e.must_match = "A=1;B=2";
  e.cpus = {0, 3, 17};
  RosterEntry back;
  ASSERT_TRUE(RosterEntry::Decode(e.Encode(), &back));
  EXPECT_EQ(back.address, e.address);
  EXPECT_EQ(back.host_id, e.host_id);
  EXPECT_EQ(back.hostname, e.hostname);
  EXPECT_EQ(back.must_match, e.must_match);
  EXPECT_EQ(back.cpus, e.cpus);
  const std::string bytes = e.Encode();
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(RosterEntry::Decode(bytes.substr(0, cut), &back)) << cut;
  EXPECT_FALSE(RosterEntry::Decode(bytes + "x", &back));
  // Single-copy: off, auto (takes part) and 1 (required) travel as 0, 1, 2; nothing else.
  for (const auto& [part, required] : {std::pair{false, false}, {true, false}, {true, true}}) {
    e.shm_cma = part;
    e.shm_cma_required = required;
    ASSERT_TRUE(RosterEntry::Decode(e.Encode(), &back));
    EXPECT_EQ(back.shm_cma, part);
    EXPECT_EQ(back.shm_cma_required, required);
  }
  std::string three = e.Encode();
  three.back() = 3;
  EXPECT_FALSE(RosterEntry::Decode(three, &back));
}

}  // namespace
}  // namespace tfring
