// Stores: MemoryStore, PrefixStore, and the authenticated TcpStoreServer / TcpStoreClient
// (timeouts, wrong secrets, garbage, malformed requests; the server keeps serving).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "rendezvous/auth.h"
#include "rendezvous/memory_store.h"
#include "base/socket.h"
#include "rendezvous/tcp_store.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;
using testing_util::SecondsSince;

// ---- behaviour every Store must have (MemoryStore and TcpStoreClient) -------------

void CheckSetGetAdd(Store& s) {
  TFRING_ASSERT_OK(s.Set("k", "v1"));
  std::string v;
  TFRING_ASSERT_OK(s.Get("k", 1, &v));
  EXPECT_EQ(v, "v1");
  TFRING_ASSERT_OK(s.Set("k", std::string("bin\0ary", 7)));  // overwrite, binary-safe
  TFRING_ASSERT_OK(s.Get("k", 1, &v));
  EXPECT_EQ(v, std::string("bin\0ary", 7));
  TFRING_ASSERT_OK(s.Set("empty", ""));
  TFRING_ASSERT_OK(s.Get("empty", 1, &v));
  EXPECT_EQ(v, "");
  int64_t n = 0;
  TFRING_ASSERT_OK(s.Add("counter", 5, &n));
  EXPECT_EQ(n, 5);
  TFRING_ASSERT_OK(s.Add("counter", -7, &n));
  EXPECT_EQ(n, -2);
  TFRING_ASSERT_OK(s.Get("counter", 1, &v));
  EXPECT_EQ(v, "-2");
  TFRING_ASSERT_OK(s.Wait({"k", "counter", "empty"}, 1));
  TFRING_ASSERT_OK(s.Wait({}, 0));
}

void CheckTimeoutsNameMissingKeys(Store& s) {
  TFRING_ASSERT_OK(s.Set("present", "1"));
  std::string v;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(HasError(s.Get("absent", 0.2, &v), ErrorCode::kTimeout, {"absent"}));
  double took = SecondsSince(t0);
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 3.0);
  t0 = std::chrono::steady_clock::now();
  Status st = s.Wait({"present", "gone1", "gone2"}, 0.2);
  EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"gone1", "gone2"}));
  EXPECT_EQ(st.message().find("present"), std::string::npos) << st.message();
  EXPECT_LT(SecondsSince(t0), 3.0);
  EXPECT_TRUE(HasError(s.Get("absent", 0, &v), ErrorCode::kTimeout, {"absent"}));
}

void CheckWaitWakesOnSet(Store& writer, Store& reader) {
  auto waiter = std::async(std::launch::async, [&] {
    std::string v;
    TFRING_RETURN_IF_ERROR(reader.Get("late", 10, &v));
    return v == "hello" ? Status::OK() : Status::Internal("got '" + v + "'");
  });
  auto waiter2 = std::async(std::launch::async, [&] { return reader.Wait({"late", "later"}, 10); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = std::chrono::steady_clock::now();
  TFRING_ASSERT_OK(writer.Set("late", "hello"));
  int64_t ignored;
  TFRING_ASSERT_OK(writer.Add("later", 1, &ignored));
  ASSERT_EQ(waiter.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "Get did not wake";
  ASSERT_EQ(waiter2.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "Wait did not wake";
  TFRING_EXPECT_OK(waiter.get());
  TFRING_EXPECT_OK(waiter2.get());
  EXPECT_LT(SecondsSince(t0), 2.0);
}

void CheckConcurrentAdds(const std::vector<Store*>& stores) {
  constexpr int kAdds = 50;
  std::vector<std::future<Status>> fs;
  for (Store* s : stores) {
    fs.push_back(std::async(std::launch::async, [s] {
      int64_t v;
      for (int i = 0; i < kAdds; ++i) TFRING_RETURN_IF_ERROR(s->Add("shared", 1, &v));
      return Status::OK();
    }));
  }
  for (auto& f : fs) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    TFRING_EXPECT_OK(f.get());
  }
  int64_t total = 0;
  TFRING_ASSERT_OK(stores[0]->Add("shared", 0, &total));
  EXPECT_EQ(total, kAdds * static_cast<int64_t>(stores.size()));
}

TEST(MemoryStoreTest, SetGetAdd) {
  MemoryStore s;
  CheckSetGetAdd(s);
}

TEST(MemoryStoreTest, TimeoutsNameMissingKeys) {
  MemoryStore s;
  CheckTimeoutsNameMissingKeys(s);
}

TEST(MemoryStoreTest, WaitWakesOnSet) {
  MemoryStore s;
  CheckWaitWakesOnSet(s, s);
}

TEST(MemoryStoreTest, ConcurrentAdds) {
  MemoryStore s;
  CheckConcurrentAdds({&s, &s, &s, &s});
}

TEST(PrefixStoreTest, NamespacesKeys) {
  auto inner = std::make_shared<MemoryStore>();
  PrefixStore a("job1/", inner), b("job2/", inner);
  TFRING_ASSERT_OK(a.Set("k", "A"));
  TFRING_ASSERT_OK(b.Set("k", "B"));
  std::string v;
  TFRING_ASSERT_OK(a.Get("k", 1, &v));
  EXPECT_EQ(v, "A");
  TFRING_ASSERT_OK(inner->Get("job2/k", 1, &v));
  EXPECT_EQ(v, "B");
  int64_t n;
  TFRING_ASSERT_OK(a.Add("c", 2, &n));
  TFRING_ASSERT_OK(b.Add("c", 3, &n));
  EXPECT_EQ(n, 3);
  TFRING_EXPECT_OK(a.Wait({"k", "c"}, 1));
  EXPECT_TRUE(HasError(a.Wait({"k", "nope"}, 0.05), ErrorCode::kTimeout, {"job1/nope"}));
}

// ---- TCP store --------------------------------------------------------------------

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = RandomHex(16);
    TFRING_ASSERT_OK(server_.Start("127.0.0.1", 0, secret_));
    ASSERT_GT(server_.port(), 0);
  }
  void TearDown() override { server_.Stop(); }

  Status Connect(std::unique_ptr<TcpStoreClient>* out, const std::string& secret = "") {
    return TcpStoreClient::Connect("127.0.0.1", server_.port(), secret.empty() ? secret_ : secret,
                                   5, 5, out);
  }
  std::unique_ptr<TcpStoreClient> Client() {
    std::unique_ptr<TcpStoreClient> c;
    Status st = Connect(&c);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return c;
  }
  // A raw connection (no handshake) for hostile clients.
  Socket Raw() {
    Socket s;
    Status st = Socket::Connect("127.0.0.1", server_.port(), Deadline::After(5), &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return s;
  }
  // Waits (bounded) until the server has refused `n` connections in total.
  bool WaitRefused(int64_t n, double timeout_s = 5) {
    auto t0 = std::chrono::steady_clock::now();
    while (server_.refused_connections() < n) {
      if (SecondsSince(t0) > timeout_s) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // The server still answers an authenticated client.
  void ExpectServing(const std::string& key) {
    auto c = Client();
    ASSERT_TRUE(c);
    TFRING_ASSERT_OK(c->Set(key, "alive"));
    std::string v;
    TFRING_ASSERT_OK(c->Get(key, 1, &v));
    EXPECT_EQ(v, "alive");
  }

  std::string secret_;
  TcpStoreServer server_;
};

TEST_F(TcpStoreTest, SetGetAdd) {
  auto c = Client();
  ASSERT_TRUE(c);
  CheckSetGetAdd(*c);
  EXPECT_NE(c->LocalAddress().find("127.0.0.1:"), std::string::npos) << c->LocalAddress();
}

TEST_F(TcpStoreTest, TimeoutsNameMissingKeys) {
  auto c = Client();
  ASSERT_TRUE(c);
  CheckTimeoutsNameMissingKeys(*c);
}

TEST_F(TcpStoreTest, WaitWakesOnSetFromAnotherClient) {
  auto writer = Client(), reader = Client();
  ASSERT_TRUE(writer && reader);
  CheckWaitWakesOnSet(*writer, *reader);
}

TEST_F(TcpStoreTest, ConcurrentClientsAddAtomically) {
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  std::vector<Store*> stores;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(Client());
    ASSERT_TRUE(clients.back());
    stores.push_back(clients.back().get());
  }
  CheckConcurrentAdds(stores);
}

TEST_F(TcpStoreTest, OneClientSharedByThreads) {
  auto c = Client();
  ASSERT_TRUE(c);
  CheckConcurrentAdds({c.get(), c.get(), c.get()});
}

TEST_F(TcpStoreTest, WrongSecretIsRefusedAndCounted) {
  std::unique_ptr<TcpStoreClient> c;
  Status st = Connect(&c, "not-the-secret");
  EXPECT_EQ(st.code(), ErrorCode::kPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("authentication"), std::string::npos) << st.ToString();
  EXPECT_FALSE(c);
  EXPECT_TRUE(WaitRefused(1));
  ExpectServing("after-wrong-secret");
  EXPECT_EQ(server_.refused_connections(), 1);
}

TEST_F(TcpStoreTest, GarbageIsRefusedAndServerKeepsServing) {
  {  // A foreign protocol that sends enough bytes for a reply: wrong MAC at once.
    Socket s = Raw();
    std::string http = "GET / HTTP/1.1\r\nHost: tfring\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n";
    TFRING_ASSERT_OK(s.SendAll(http.data(), http.size(), Deadline::After(2)));
    EXPECT_TRUE(WaitRefused(1));
    // The server hangs up on it.
    char buf[64];
    Status st;
    do {
      st = s.RecvAll(buf, 1, Deadline::After(5));
    } while (st.ok());
    EXPECT_EQ(st.code(), ErrorCode::kPeerLost) << st.ToString();
  }
  {  // A short burst, then the stranger leaves.
    Socket s = Raw();
    TFRING_ASSERT_OK(s.SendAll("\x01\x02\x03", 3, Deadline::After(2)));
    s.Close();
    EXPECT_TRUE(WaitRefused(2));
  }
  {  // Connects and closes without a byte.
    Socket s = Raw();
    s.Close();
    EXPECT_TRUE(WaitRefused(3));
  }
  ExpectServing("after-garbage");
  EXPECT_EQ(server_.refused_connections(), 3);
}

TEST_F(TcpStoreTest, SilentStrangerDoesNotBlockOthers) {
  Socket idle = Raw();  // never answers the greeting; holds one server thread
  auto t0 = std::chrono::steady_clock::now();
  ExpectServing("while-a-stranger-waits");
  EXPECT_LT(SecondsSince(t0), 3.0);
}

TEST_F(TcpStoreTest, MalformedRequestsDropOnlyThatClient) {
  auto good = Client();
  ASSERT_TRUE(good);
  struct Bad {
    const char* what;
    std::string frame;
  } bads[] = {
      {"unknown command", std::string("\x09", 1)},
      {"empty frame", std::string()},
      {"truncated SET", std::string("\x01\x05\x00\x00\x00" "ab", 7)},
      {"GET with trailing bytes", std::string("\x02\x01\x00\x00\x00k", 6) + std::string(8, '\0') + "zz"},
      {"WAIT with huge count", std::string("\x04\xff\xff\xff\xff", 5)},
  };
  for (const auto& bad : bads) {
    Socket s = Raw();
    TFRING_ASSERT_OK(AuthenticateAsClient(s, secret_, Deadline::After(5)));
    TFRING_ASSERT_OK(s.SendMessage(bad.frame, Deadline::After(2)));
    std::string reply;
    Status st = s.RecvMessage(&reply, 1 << 20, Deadline::After(5));
    EXPECT_EQ(st.code(), ErrorCode::kPeerLost) << bad.what << ": " << st.ToString();
  }
  {  // A frame announcing more than the store accepts.
    Socket s = Raw();
    TFRING_ASSERT_OK(AuthenticateAsClient(s, secret_, Deadline::After(5)));
    uint32_t huge = 0xfffffff0u;
    TFRING_ASSERT_OK(s.SendAll(&huge, 4, Deadline::After(2)));
    char b;
    EXPECT_EQ(s.RecvAll(&b, 1, Deadline::After(5)).code(), ErrorCode::kPeerLost);
  }
  {  // A GET whose timeout is negative / NaN is refused rather than waiting forever.
    Socket s = Raw();
    TFRING_ASSERT_OK(AuthenticateAsClient(s, secret_, Deadline::After(5)));
    double nan = std::nan("");
    std::string frame = std::string("\x02\x01\x00\x00\x00k", 6) + std::string(reinterpret_cast<char*>(&nan), 8);
    TFRING_ASSERT_OK(s.SendMessage(frame, Deadline::After(2)));
    std::string reply;
    EXPECT_EQ(s.RecvMessage(&reply, 1 << 20, Deadline::After(5)).code(), ErrorCode::kPeerLost);
  }
  // The good client's connection was never disturbed.
  TFRING_ASSERT_OK(good->Set("still", "here"));
  std::string v;
  TFRING_ASSERT_OK(good->Get("still", 1, &v));
  EXPECT_EQ(v, "here");
  EXPECT_EQ(server_.refused_connections(), 0);  // they authenticated; dropped, not refused
}

TEST_F(TcpStoreTest, StopWakesBlockedClientsPromptly) {
  auto c = Client();
  ASSERT_TRUE(c);
  auto blocked = std::async(std::launch::async, [&] {
    std::string v;
    return c->Get("never", 30, &v);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  server_.Stop();
  server_.Stop();  // idempotent
  EXPECT_LT(SecondsSince(t0), 5.0);
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  Status st = blocked.get();
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == ErrorCode::kAborted || st.code() == ErrorCode::kPeerLost) << st.ToString();
  // Later calls on the client fail instead of hanging.
  EXPECT_FALSE(c->Set("x", "y").ok());
}

TEST_F(TcpStoreTest, ConnectTimesOutWhenNobodyListens) {
  Listener l;
  TFRING_ASSERT_OK(Listener::Listen("127.0.0.1", 0, &l));
  int port = l.port();
  l.Close();
  std::unique_ptr<TcpStoreClient> c;
  auto t0 = std::chrono::steady_clock::now();
  Status st = TcpStoreClient::Connect("127.0.0.1", port, secret_, 0.3, 1, &c);
  EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"TFRING_STORE_ADDR=127.0.0.1:" + std::to_string(port)}));
  EXPECT_LT(SecondsSince(t0), 3.0);
}

TEST(TcpStoreServerTest, EmptySecretIsRefused) {
  TcpStoreServer s;
  EXPECT_TRUE(HasError(s.Start("127.0.0.1", 0, ""), ErrorCode::kInvalidArgument, {"secret"}));
}

TEST(TcpStoreServerTest, ManyShortLivedClients) {
  TcpStoreServer server;
  std::string secret = RandomHex(8);
  TFRING_ASSERT_OK(server.Start("127.0.0.1", 0, secret));
  for (int i = 0; i < 60; ++i) {
    std::unique_ptr<TcpStoreClient> c;
    TFRING_ASSERT_OK(TcpStoreClient::Connect("127.0.0.1", server.port(), secret, 5, 5, &c));
    int64_t v;
    TFRING_ASSERT_OK(c->Add("n", 1, &v));
    EXPECT_EQ(v, i + 1);
  }
  server.Stop();
}

}  // namespace
}  // namespace tfring
