#include "rendezvous/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

namespace tfring {
namespace {

constexpr char kMagic[4] = {'T', 'F', 'R', '1'};
constexpr size_t kNonceSize = 16;
constexpr size_t kMacSize = 32;

std::string Mac(const std::string& secret, const std::string& label, const std::string& a,
                const std::string& b) {
  std::string msg = label + a + b;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &out_len);
  return std::string(reinterpret_cast<char*>(out), out_len);
}

std::string Nonce() {
  std::string n(kNonceSize, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size()));
  return n;
}

bool SameMac(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

Status AuthenticateAsServer(Socket& socket, const std::string& secret, Deadline deadline) {
  std::string ns = Nonce();
  std::string hello(kMagic, 4);
  hello += ns;
  TFRING_RETURN_IF_ERROR(socket.SendAll(hello.data(), hello.size(), deadline));
  std::string reply(kNonceSize + kMacSize, '\0');
  Status st = socket.RecvAll(reply.data(), reply.size(), deadline);
  if (!st.ok()) {
    return Status::Precondition("authentication failed for " + socket.label() +
                                ": no valid reply (" + st.message() + ")");
  }
  std::string nc = reply.substr(0, kNonceSize);
  if (!SameMac(reply.substr(kNonceSize), Mac(secret, "client", ns, nc))) {
    return Status::Precondition("authentication failed for " + socket.label() +
                                ": wrong job secret or not a tfring peer");
  }
  std::string proof = Mac(secret, "server", nc, ns);
  return socket.SendAll(proof.data(), proof.size(), deadline);
}

Status AuthenticateAsClient(Socket& socket, const std::string& secret, Deadline deadline) {
  char hello[4 + kNonceSize];
  TFRING_RETURN_IF_ERROR(socket.RecvAll(hello, sizeof(hello), deadline));
  if (std::memcmp(hello, kMagic, 4) != 0) {
    return Status::Precondition("authentication failed: " + socket.label() +
                                " is not a tfring server (bad greeting)");
  }
  std::string ns(hello + 4, kNonceSize);
  std::string nc = Nonce();
  std::string reply = nc + Mac(secret, "client", ns, nc);
  TFRING_RETURN_IF_ERROR(socket.SendAll(reply.data(), reply.size(), deadline));
  std::string proof(kMacSize, '\0');
  Status st = socket.RecvAll(proof.data(), proof.size(), deadline);
  if (!st.ok()) {
    return Status::Precondition("authentication refused by " + socket.label() +
                                ": the job secret (TFRING_SECRET) does not match (" +
                                st.message() + ")");
  }
  if (!SameMac(proof, Mac(secret, "server", nc, ns))) {
    return Status::Precondition("authentication failed: " + socket.label() +
                                " could not prove the job secret");
  }
  return Status::OK();
}

std::string RandomHex(size_t num_bytes) {
  std::string raw(num_bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(num_bytes));
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace tfring
