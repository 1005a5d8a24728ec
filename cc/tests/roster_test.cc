// The init exchange (roster.h, job_layout.h, peer_directory.h): O(n) store requests and
// bytes in all, every rank knows every rank's host, a rank reads only the cards of the
// peers it talks to, and a rank that never starts is named on every rank that did, without
// each waiting out its own timeout.
#include "rendezvous/roster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <tuple>
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

// A view of a store that counts the requests made through it and the bytes they read
// (thread-safe, as the store is). One per rank counts that rank's traffic.
class CountingStore : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner = std::make_shared<MemoryStore>()) : inner_(std::move(inner)) {}
  Status Set(const std::string& key, const std::string& value) override {
    ++requests;
    return inner_->Set(key, value);
  }
  Status Get(const std::string& key, double timeout_s, std::string* value) override {
    ++requests;
    Status st = inner_->Get(key, timeout_s, value);
    if (st.ok()) bytes_read += static_cast<int64_t>(value->size());
    return st;
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    ++requests;
    return inner_->Add(key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, double timeout_s) override {
    ++requests;
    return inner_->Wait(keys, timeout_s);
  }
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> bytes_read{0};  // values returned by Get

 private:
  std::shared_ptr<Store> inner_;
};

// A roster entry as a real rank publishes it: ~420 bytes of shared settings, 64 CPUs.
RosterEntry RealisticEntry(int rank, int ranks_per_host) {
  RosterEntry e;
  const int host = rank / ranks_per_host;
  e.host_id = "node-" + std::to_string(host) + "/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/" + std::to_string(host);
  e.hostname = "node-" + std::to_string(host);
  e.must_match = std::string(420, 'm');
  for (int cpu = 0; cpu < 64; ++cpu) e.cpus.push_back(cpu);
  return e;
}

// Every rank's ExchangeRoster through its own counting view of one store; returns the
// views (by rank) and every rank's layout.
std::vector<std::shared_ptr<CountingStore>> Exchange(int n, int ranks_per_host, std::vector<JobLayout>* layouts) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::shared_ptr<CountingStore>> views;
  for (int r = 0; r < n; ++r) views.push_back(std::make_shared<CountingStore>(store));
  layouts->assign(static_cast<size_t>(n), JobLayout{});
  auto statuses = RunRanks(n, 60, [&](int r) {
    PeerCard card;
    card.address = "10.0.0." + std::to_string(r / ranks_per_host) + ":" + std::to_string(40000 + r);
    return ExchangeRoster(r, n, RealisticEntry(r, ranks_per_host), card, *views[r], Deadline::After(30),
                          &(*layouts)[static_cast<size_t>(r)]);
  });
  for (const auto& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
  return views;
}

// The store serves O(n) bytes in all: rank 0 reads every entry once, every other rank one
// layout whose size follows the hosts, not the ranks (the whole roster was ~500 bytes per
// rank read by every rank: 4x the bytes per doubling of the job).
TEST(RosterTest, EachRankReadsBytesThatGrowWithTheHostsNotTheRanks) {
  std::map<int, int64_t> worker_bytes, rank0_bytes;
  for (int n : {64, 256}) {
    std::vector<JobLayout> layouts;
    auto views = Exchange(n, n / 4, &layouts);  // 4 hosts, whatever the size
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(views[r]->requests.load(), 3) << "rank " << r << ": card, entry, layout";
      EXPECT_EQ(views[r]->bytes_read.load(), views[1]->bytes_read.load()) << r;
    }
    worker_bytes[n] = views[1]->bytes_read.load();
    rank0_bytes[n] = views[0]->bytes_read.load();
    EXPECT_EQ(views[0]->requests.load(), n + 1) << "rank 0: its card, n-1 entries, the layout";
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(layouts[r].host_of.size(), static_cast<size_t>(n));
      EXPECT_EQ(layouts[r].hosts.size(), 4u);
      EXPECT_EQ(layouts[r].host_of[n - 1], 3);
      EXPECT_EQ(layouts[r].hosts[3].cpus, 64);
      EXPECT_EQ(layouts[r].machines.size(), 4u);
      EXPECT_EQ(layouts[r].machines[0].ranks, n / 4);
    }
  }
  EXPECT_EQ(worker_bytes[64], worker_bytes[256]);
  EXPECT_LT(worker_bytes[256], 512);
  // Rank 0 reads each entry once: linear in the ranks.
  EXPECT_EQ(rank0_bytes[256] / 255, rank0_bytes[64] / 63);
  // Hosts of 8 ranks: the layout grows by one host's id and name per 8 ranks.
  std::vector<JobLayout> layouts;
  auto views = Exchange(256, 8, &layouts);
  EXPECT_EQ(layouts[5].hosts.size(), 32u);
  EXPECT_LT(views[1]->bytes_read.load(), 32 * 100) << "about 90 bytes per host";
  EXPECT_GT(views[1]->bytes_read.load(), 32 * 60);
}

// With lazy data connections a rank reads at init only the cards of the peers it dials:
// its control-tree parent and its lower ring neighbour (rank n-1 also rank 0's); with the
// full mesh every lower rank's. Cards of other peers come at first use.
TEST(RosterTest, ARankReadsOnlyTheCardsOfThePeersItDials) {
  const int n = 64;
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::shared_ptr<CountingStore>> views;
  MeshOptions o;
  o.size = n;
  o.lazy_data = true;
  o.hostnames_by_host = true;
  o.ranks_per_host = n;
  for (int r = 0; r < n; ++r) views.push_back(std::make_shared<CountingStore>(store));
  o.rank_stores.assign(views.begin(), views.end());
  Mesh mesh;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  for (int r = 0; r < n; ++r) {
    const std::set<int> dialled = {mesh[r].control_tree().parent(), r - 1, r == n - 1 ? 0 : -1};
    const int expected = static_cast<int>(dialled.size()) - (dialled.count(-1) ? 1 : 0);
    EXPECT_EQ(mesh[r].peer_cards_read(), expected) << "rank " << r;
    EXPECT_LT(views[r]->bytes_read.load(), r == 0 ? 100 * n : 400) << "rank " << r;
  }
  // A data connection made on first use reads the peer's card then, once.
  const int before = mesh[0].peer_cards_read();
  const int64_t bytes_before = views[0]->bytes_read.load();
  EXPECT_TRUE(mesh[0].data(37).socket().valid());
  EXPECT_EQ(mesh[0].peer_cards_read(), before + 1);
  EXPECT_GT(views[0]->bytes_read.load(), bytes_before);
  EXPECT_TRUE(mesh[0].data(37).socket().valid());
  EXPECT_EQ(mesh[0].peer_cards_read(), before + 1) << "read again";

  MeshOptions full;
  full.size = 9;
  Mesh mesh9;
  TFRING_ASSERT_OK(MakeMesh(full, &mesh9));
  for (int r = 0; r < 9; ++r) EXPECT_EQ(mesh9[r].peer_cards_read(), r == 8 ? 8 : r) << "the full mesh, rank " << r;
}

TEST(RosterTest, InitMakesLinearStoreRequestsAndEveryRankKnowsEveryHost) {
  for (int n : {2, 5, 9}) {
    auto store = std::make_shared<CountingStore>();
    MeshOptions o;
    o.size = n;
    o.ranks_per_host = 2;
    o.lazy_data = true;
    o.store = store;
    Mesh mesh;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    // Each rank publishes its card and entry (rank 0: its card and the layout), rank 0
    // reads n-1 entries, the others the layout; then each rank reads the cards of the
    // peers it dials (parent, lower ring neighbour; rank n-1 rank 0's too).
    int cards = 0;
    for (int r = 0; r < n; ++r) cards += mesh[r].peer_cards_read();
    EXPECT_EQ(store->requests.load(), 4 * n - 2 + cards) << n << " ranks";
    EXPECT_LE(cards, 2 * n) << n << " ranks";
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        EXPECT_EQ(mesh[r].host_ids()[p], "test-host-" + std::to_string(p / 2)) << r << " about " << p;
        EXPECT_EQ(mesh[r].hostname_of(p), "host" + std::to_string(p)) << r << " about " << p;
      }
    }
  }
}

// Shared-memory rings between the ranks of a host: a constant number of store requests per
// rank (the ring names follow from the local peers' cards), not a few per local peer (64
// ranks on one host made ~20,000 requests and took ~1 s longer to init than TCP,
// lab/records/scaling.md).
// With lazy data connections only the control rings (control-tree neighbours on the host)
// are made at init, so a rank waits for and reads the cards of those peers only; its data
// rings come with each pair's first transfer (shm_pairing.h), with no store request.
TEST(RosterTest, SharedMemoryRingsCostFourStoreRequestsPerRankWhateverTheLocalPeers) {
  for (auto [n, per_host, lazy] : {std::tuple{8, 8, false}, std::tuple{9, 4, false}, std::tuple{24, 24, true},
                                   std::tuple{24, 6, true}}) {
    auto store = std::make_shared<CountingStore>();
    MeshOptions o;
    o.size = n;
    o.ranks_per_host = per_host;
    o.shm = true;
    o.lazy_data = lazy;
    o.store = store;
    Mesh mesh;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    int with_ring_peers = 0, cards = 0;
    for (int r = 0; r < n; ++r) {
      const int host_size = std::min(per_host, n - r / per_host * per_host);
      std::set<int> ring_peers;  // the local peers this rank shares a ring with at init
      for (int p = r / per_host * per_host; p < r / per_host * per_host + host_size; ++p) {
        if (p != r && (!lazy || mesh[r].control_tree().IsNeighbour(p))) ring_peers.insert(p);
      }
      EXPECT_EQ(mesh[r].shm_peers(), lazy ? 0 : host_size - 1) << r;
      with_ring_peers += ring_peers.empty() ? 0 : 1;
      cards += mesh[r].peer_cards_read();
      if (lazy) {
        std::set<int> dialled = {mesh[r].control_tree().parent(), r - 1, r == n - 1 ? 0 : -1};
        dialled.insert(ring_peers.begin(), ring_peers.end());
        dialled.erase(-1);
        EXPECT_EQ(mesh[r].peer_cards_read(), static_cast<int>(dialled.size())) << "rank " << r;
      }
    }
    EXPECT_EQ(store->requests.load(), (4 * n - 2) + cards + 4 * with_ring_peers)
        << n << " ranks, " << per_host << " per host" << (lazy ? ", lazily" : "");
    if (!lazy) continue;
    const int cards_at_init_0 = mesh[0].peer_cards_read();
    // A pair's first transfer makes its rings without the store (beyond the dialling rank's
    // read of its peer's address, if it had not read it yet).
    const int64_t requests = store->requests.load();
    const int far = per_host - 1;  // on rank 0's host, not a control-tree neighbour of it
    ASSERT_FALSE(mesh[0].control_tree().IsNeighbour(far));
    const int cards_before = mesh[far].peer_cards_read();
    EXPECT_TRUE(mesh[far].data(0).socket().valid());  // rank `far` dials; rank 0's park answers
    auto statuses = RunRanks(2, 30, [&](int i) -> Status {
      const int me = i == 0 ? 0 : far, peer = i == 0 ? far : 0;
      int32_t out = me, in = -1;
      return Transfer(mesh[me].data(peer), &out, sizeof out, mesh[me].data(peer), &in, sizeof in,
                      mesh[me].TransferDeadline(), mesh[me].abort_flag());
    });
    for (const Status& st : statuses) EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(mesh[0].peek(far).shm());
    EXPECT_TRUE(mesh[far].peek(0).shm());
    EXPECT_EQ(mesh[0].shm_peers(), 1);
    EXPECT_EQ(store->requests.load() - requests, mesh[far].peer_cards_read() - cards_before);
    EXPECT_EQ(mesh[0].peer_cards_read(), cards_at_init_0) << "rank 0 accepted: it reads no card";
  }
}

TEST(RosterTest, ARankThatNeverStartsIsNamedOnEveryRankAtRankZerosTimeout) {
  MemoryStore store;
  RosterEntry entry;
  PeerCard card;
  card.address = "127.0.0.1:1";
  const auto start = std::chrono::steady_clock::now();
  // Ranks 0, 1 and 3 of 5 start; 2 and 4 never do.
  auto statuses = RunRanks(3, 20, [&](int i) {
    const int rank = i == 2 ? 3 : i;
    JobLayout layout;
    return ExchangeRoster(rank, 5, entry, card, store, Deadline::After(i == 0 ? 1.0 : 15.0), &layout);
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
    entry.must_match = rank == 2 ? "TFRING_SHM=0" : "TFRING_SHM=1";
    JobLayout layout;
    return ExchangeRoster(rank, 3, entry, PeerCard{}, store, Deadline::After(10), &layout);
  });
  for (const auto& st : statuses) {
    EXPECT_TRUE(HasError(st, ErrorCode::kInvalidArgument, {"rank 2 has 'TFRING_SHM=0'", "rank 0 has 'TFRING_SHM=1'"}))
        << st.ToString();
  }
}

TEST(RosterTest, EntriesAndCardsRoundTripAndGarbageIsRefused) {
  RosterEntry e;
  e.host_id = "h/boot/3";
  e.hostname = "node-7";
  e.must_match = "A=1;B=2";
  e.cpus = {0, 3, 17};
  RosterEntry back;
  ASSERT_TRUE(RosterEntry::Decode(e.Encode(), &back));
  EXPECT_EQ(back.host_id, e.host_id);
  EXPECT_EQ(back.hostname, e.hostname);
  EXPECT_EQ(back.must_match, e.must_match);
  EXPECT_EQ(back.cpus, e.cpus);
  const std::string bytes = e.Encode();
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(RosterEntry::Decode(bytes.substr(0, cut), &back)) << cut;
  EXPECT_FALSE(RosterEntry::Decode(bytes + "x", &back));

  PeerCard c;
  c.address = "[::1]:4242";
  c.shm_token = "0123456789abcdef";
  c.shm_cma = true;
  PeerCard card_back;
  ASSERT_TRUE(PeerCard::Decode(c.Encode(), &card_back));
  EXPECT_EQ(card_back.address, c.address);
  EXPECT_EQ(card_back.shm_token, c.shm_token);
  EXPECT_TRUE(card_back.shm_cma);
  const std::string card_bytes = c.Encode();
  for (size_t cut = 0; cut < card_bytes.size(); ++cut) {
    EXPECT_FALSE(PeerCard::Decode(card_bytes.substr(0, cut), &card_back)) << cut;
  }
  EXPECT_FALSE(PeerCard::Decode(card_bytes + "x", &card_back));
  // Single-copy: off, auto (takes part) and 1 (required) travel as 0, 1, 2; nothing else.
  for (const auto& [part, required] : {std::pair{false, false}, {true, false}, {true, true}}) {
    c.shm_cma = part;
    c.shm_cma_required = required;
    ASSERT_TRUE(PeerCard::Decode(c.Encode(), &card_back));
    EXPECT_EQ(card_back.shm_cma, part);
    EXPECT_EQ(card_back.shm_cma_required, required);
  }
  std::string three = c.Encode();
  three.back() = 3;
  EXPECT_FALSE(PeerCard::Decode(three, &card_back));
}

// A host's ranks in a row encode as one run; interleaved hosts (rank r on host r % H) as a
// run per rank; both decode to the same host of every rank.
TEST(RosterTest, LayoutEncodesRunsOfRanksAndRefusesGarbage) {
  for (bool interleaved : {false, true}) {
    std::vector<RosterEntry> entries;
    for (int r = 0; r < 64; ++r) entries.push_back(RealisticEntry(interleaved ? r % 4 : r / 16, 1));
    entries[5].cpus = {100};
    const JobLayout layout = JobLayout::FromEntries(entries);
    ASSERT_EQ(layout.hosts.size(), 4u);
    const std::string bytes = layout.Encode();
    JobLayout back;
    ASSERT_TRUE(JobLayout::Decode(bytes, 64, &back));
    EXPECT_EQ(back.host_of, layout.host_of);
    for (int r = 0; r < 64; ++r) EXPECT_EQ(back.host_of[r], interleaved ? r % 4 : r / 16) << r;
    const int host5 = back.host_of[5];
    EXPECT_EQ(back.hosts[host5].cpus, 65) << "the union of its ranks' masks";
    EXPECT_EQ(back.hostnames[back.hostname_of[5]], entries[5].hostname);
    EXPECT_EQ(back.hosts[host5].id, entries[5].host_id);
    EXPECT_EQ(back.machines.size(), 4u);
    // 4 hosts of ~90 bytes with their names; runs of 8 bytes: 2 x 4 in a row, 2 x 64 interleaved.
    EXPECT_LT(bytes.size(), interleaved ? 4 * 90 + 2 * 64 * 8 + 32 : 4 * 90 + 2 * 4 * 8 + 32);
    EXPECT_FALSE(JobLayout::Decode(bytes, 63, &back)) << "another job's size";
    EXPECT_FALSE(JobLayout::Decode(bytes, 65, &back));
    for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(JobLayout::Decode(bytes.substr(0, cut), 64, &back)) << cut;
    EXPECT_FALSE(JobLayout::Decode(bytes + "x", 64, &back));
  }
}

}  // namespace
}  // namespace tfring
