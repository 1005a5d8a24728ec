#include "rendezvous/tcp_store.h"

#include <cstdlib>

#include "base/thread_name.h"
#include "rendezvous/auth.h"
#include "base/logging.h"
#include "rendezvous/memory_store.h"
#include "base/wire.h"

namespace tfring {
namespace {

enum StoreCommand : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };
constexpr double kHandshakeTimeoutS = 10.0;
constexpr size_t kMaxWaitKeys = 1 << 16;

std::string Reply(const Status& st) {
  WireWriter w;
  w.U8(static_cast<uint8_t>(st.code()));
  w.Str(st.message());
  return w.Take();
}

}  // namespace

TcpStoreServer::~TcpStoreServer() { Stop(); }

Status TcpStoreServer::Start(const std::string& host, int port, const std::string& secret) {
  if (secret.empty()) return Status::InvalidArgument("the store needs a non-empty job secret");
  secret_ = secret;
  TFRING_RETURN_IF_ERROR(Listener::Listen(host, port, &listener_));
  accept_thread_ = std::thread([this] {
    NameThisThread("tfring-store");
    AcceptLoop();
  });
  return Status::OK();
}

void TcpStoreServer::Stop() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_flag_ = true;
  }
  cv_.notify_all();
  listener_.Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  listener_.Close();
  std::list<Client> clients;
  {
    std::lock_guard<std::mutex> lock(clients_mu_);
    clients.swap(clients_);
  }
  for (auto& c : clients) c.socket->Shutdown();
  for (auto& c : clients) {
    if (c.thread.joinable()) c.thread.join();
  }
}

void TcpStoreServer::AcceptLoop() {
  while (!stopping_.load()) {
    Socket socket;
    Status st = listener_.Accept(Deadline::After(3600), &socket, &stopping_);
    if (!st.ok()) {
      if (stopping_.load()) return;
      continue;
    }
    auto client = std::make_shared<Socket>(std::move(socket));
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard<std::mutex> lock(clients_mu_);
    if (stopping_.load()) return;
    ReapFinishedClients();
    clients_.push_back(Client{client, std::thread([this, client, finished] {
                                NameThisThread("tfring-store");
                                ServeClient(client);
                                finished->store(true);
                              }),
                              finished});
  }
}

void TcpStoreServer::ReapFinishedClients() {
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->finished->load()) {
      it->thread.join();
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpStoreServer::ServeClient(std::shared_ptr<Socket> client) {
  Status st = AuthenticateAsServer(*client, secret_, Deadline::After(kHandshakeTimeoutS));
  if (!st.ok()) {
    refused_.fetch_add(1);
    if (!stopping_.load()) {
      TFRING_LOG(LogLevel::kWarning, "store",
                 "refused a client: " << st.message() << "; the job goes on");
    }
    client->Shutdown();
    return;
  }
  while (!stopping_.load()) {
    std::string request;
    st = client->RecvMessage(&request, kMaxStoreMessage, Deadline::Never(), &stopping_);
    if (!st.ok()) break;  // client left (normal at the end of a job) or sent garbage
    std::string reply;
    st = Handle(request, &reply);
    if (!st.ok()) {
      TFRING_LOG(LogLevel::kWarning, "store",
                 "dropping " << client->label() << ": " << st.message());
      break;
    }
    if (!client->SendMessage(reply, Deadline::After(kHandshakeTimeoutS)).ok()) break;
  }
  client->Shutdown();
}

Status TcpStoreServer::Handle(const std::string& request, std::string* reply) {
  WireReader r(request);
  uint8_t cmd = r.U8();
  switch (cmd) {
    case kSet: {
      std::string key = r.Str();
      std::string value = r.Str();
      if (!r.ok() || !r.AtEnd()) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        data_[key] = value;
      }
      cv_.notify_all();
      *reply = Reply(Status::OK());
      return Status::OK();
    }
    case kGet: {
      std::string key = r.Str();
      double timeout = r.F64();
      if (!r.ok() || !r.AtEnd() || !(timeout >= 0) || timeout > 1e7) break;
      std::unique_lock<std::mutex> lock(mu_);
      Status st = WaitForKeys(lock, cv_, data_, {key}, timeout, &stopping_flag_);
      WireWriter w;
      w.U8(static_cast<uint8_t>(st.code()));
      w.Str(st.message());
      w.Str(st.ok() ? data_[key] : std::string());
      *reply = w.Take();
      return Status::OK();
    }
    case kAdd: {
      std::string key = r.Str();
      int64_t delta = r.I64();
      if (!r.ok() || !r.AtEnd()) break;
      int64_t value = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = data_.find(key);
        if (it != data_.end()) value = std::strtoll(it->second.c_str(), nullptr, 10);
        value += delta;
        data_[key] = std::to_string(value);
      }
      cv_.notify_all();
      WireWriter w;
      w.U8(0);
      w.Str("");
      w.I64(value);
      *reply = w.Take();
      return Status::OK();
    }
    case kWait: {
      uint32_t n = r.Count(4);
      if (!r.ok() || n > kMaxWaitKeys) break;
      std::vector<std::string> keys(n);
      for (auto& k : keys) k = r.Str();
      double timeout = r.F64();
      if (!r.ok() || !r.AtEnd() || !(timeout >= 0) || timeout > 1e7) break;
      std::unique_lock<std::mutex> lock(mu_);
      *reply = Reply(WaitForKeys(lock, cv_, data_, keys, timeout, &stopping_flag_));
      return Status::OK();
    }
    default:
      break;
  }
  return Status::InvalidArgument("malformed store request (command " + std::to_string(cmd) +
                                 ", " + std::to_string(request.size()) + " bytes)");
}

Status TcpStoreClient::Connect(const std::string& host, int port, const std::string& secret,
                               double connect_timeout_s, double request_timeout_s,
                               std::unique_ptr<TcpStoreClient>* out) {
  auto client = std::unique_ptr<TcpStoreClient>(new TcpStoreClient());
  client->request_timeout_s_ = request_timeout_s;
  Deadline deadline = Deadline::After(connect_timeout_s);
  TFRING_RETURN_IF_ERROR(Socket::Connect(host, port, deadline, &client->socket_)
                             .WithContext("cannot reach the tfring store (TFRING_STORE_ADDR=" +
                                          host + ":" + std::to_string(port) + ")"));
  client->socket_.set_label("the tfring store at " + host + ":" + std::to_string(port));
  TFRING_RETURN_IF_ERROR(AuthenticateAsClient(client->socket_, secret, deadline));
  *out = std::move(client);
  return Status::OK();
}

Status TcpStoreClient::Call(const std::string& request, double timeout_s,
                            std::string* reply_tail) {
  std::lock_guard<std::mutex> lock(mu_);
  Deadline deadline = Deadline::After(timeout_s + request_timeout_s_);
  TFRING_RETURN_IF_ERROR(socket_.SendMessage(request, deadline));
  std::string reply;
  TFRING_RETURN_IF_ERROR(socket_.RecvMessage(&reply, kMaxStoreMessage, deadline));
  WireReader r(reply);
  uint8_t code = r.U8();
  std::string message = r.Str();
  if (!r.ok()) return Status::Internal("malformed reply from the tfring store");
  if (code != 0) return Status(static_cast<ErrorCode>(code), message);
  *reply_tail = reply.substr(reply.size() - r.Remaining());
  return Status::OK();
}

Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  WireWriter w;
  w.U8(kSet);
  w.Str(key);
  w.Str(value);
  std::string tail;
  return Call(w.data(), 0, &tail);
}

Status TcpStoreClient::Get(const std::string& key, double timeout_s, std::string* value) {
  WireWriter w;
  w.U8(kGet);
  w.Str(key);
  w.F64(timeout_s);
  std::string tail;
  TFRING_RETURN_IF_ERROR(Call(w.data(), timeout_s, &tail));
  WireReader r(tail);
  *value = r.Str();
  return r.ok() ? Status::OK() : Status::Internal("malformed GET reply from the tfring store");
}

Status TcpStoreClient::Add(const std::string& key, int64_t delta, int64_t* result) {
  WireWriter w;
  w.U8(kAdd);
  w.Str(key);
  w.I64(delta);
  std::string tail;
  TFRING_RETURN_IF_ERROR(Call(w.data(), 0, &tail));
  WireReader r(tail);
  *result = r.I64();
  return r.ok() ? Status::OK() : Status::Internal("malformed ADD reply from the tfring store");
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys, double timeout_s) {
  WireWriter w;
  w.U8(kWait);
  w.U32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.Str(k);
  w.F64(timeout_s);
  std::string tail;
  return Call(w.data(), timeout_s, &tail);
}

}  // namespace tfring
