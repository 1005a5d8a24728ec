// The job's rendezvous store over TCP, authenticated with the job secret (see auth.h).
//
// TcpStoreServer: served by `tfringrun` (through the Python module) or by tests. One thread
//   accepts; one thread per authenticated client serves its requests. Refused clients
//   (wrong secret, garbage) are logged and dropped; the store keeps serving the others.
// TcpStoreClient: one connection, used by one rank. Thread-safe (calls are serialized).
//
// Wire format (each frame length-prefixed, see Socket::SendMessage):
//   request : u8 command, then  SET: str key, str value | GET: str key, f64 timeout
//             | ADD: str key, i64 delta | WAIT: u32 n, n x str key, f64 timeout
//   reply   : u8 error code (ErrorCode), str message, then GET: str value | ADD: i64 value
#pragma once

#include <atomic>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/socket.h"
#include "rendezvous/store.h"

namespace tfring {

constexpr size_t kMaxStoreMessage = 64 << 20;

class TcpStoreServer {
 public:
  TcpStoreServer() = default;
  ~TcpStoreServer();

  // Binds host:port (port 0 = any free port) and starts serving. Non-blocking.
  Status Start(const std::string& host, int port, const std::string& secret);
  // Stops accepting, closes every client, joins every thread. Idempotent.
  void Stop();
  int port() const { return listener_.port(); }
  int64_t refused_connections() const { return refused_.load(); }

 private:
  void AcceptLoop();
  void ServeClient(std::shared_ptr<Socket> client);
  Status Handle(const std::string& request, std::string* reply);

  Listener listener_;
  std::string secret_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  bool stopping_flag_ = false;  // guarded by mu_, read by waits
  std::atomic<int64_t> refused_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;

  struct Client {
    std::shared_ptr<Socket> socket;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  void ReapFinishedClients();  // joins threads of clients that left; caller holds clients_mu_

  std::mutex clients_mu_;
  std::list<Client> clients_;
};

class TcpStoreClient : public Store {
 public:
  // Connects and authenticates, retrying until `connect_timeout_s` passes.
  static Status Connect(const std::string& host, int port, const std::string& secret,
                        double connect_timeout_s, double request_timeout_s,
                        std::unique_ptr<TcpStoreClient>* out);

  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout_s, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  Status Wait(const std::vector<std::string>& keys, double timeout_s) override;

  // "ip:port" of this end of the connection: the interface that reaches the store.
  std::string LocalAddress() const { return socket_.LocalAddress(); }

 private:
  Status Call(const std::string& request, double timeout_s, std::string* reply_tail);

  std::mutex mu_;
  Socket socket_;
  double request_timeout_s_ = 30;
};

}  // namespace tfring
