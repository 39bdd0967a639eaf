// The installed C++ API of longhaul (liblonghaul.so, `#include <longhaul/longhaul.h>`):
// an Endpoint that listens and connects, and Connections that carry messages.
//
//   using namespace longhaul::api;
//   EndpointOptions eo;
//   eo.security.key_file = "server.key";            // longhaul-keygen --out=server
//   eo.security.peer_key_file = "clients.pub";      // the client keys allowed
//   auto ep = Endpoint::Create(eo);                  // starts the driver thread
//   ListenOptions lo;
//   lo.settings.values = {{"rate", "1gbit"}};        // profile keys, as the tools' flags
//   auto port = (*ep)->Listen("0.0.0.0", 5201, lo);
//   auto conn = (*ep)->Accept(std::chrono::seconds(10));
//   (*conn)->PostReceive(buffer, /*tag=*/1);
//   Event e;
//   while ((*conn)->Wait(&e, std::chrono::seconds(1))) { ... }
//
// Messages: Send() queues a whole message (any size up to what the receiver can hold);
// the receiver gets it whole, in order, as one kReceiveComplete event, in a buffer it
// posted or in memory the event owns. Every connection ends with exactly one kClosed
// event whose status says why (OK for a clean close).
//
// Thread-safety: every method may be called from any thread. Connect, Listen and
// Endpoint::Close must not be called from an event callback (they wait for the driver
// thread). Errors are absl::Status values whose messages name the problem (the file, the
// setting, the address).
//
// ABI: the classes hold their state behind a pointer; the option structs and Event are
// plain values. Names under longhaul::api and longhaul::Version() are what
// liblonghaul.so exports; nothing else of the library is visible.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "longhaul/export.h"

namespace longhaul::api {

// Packet protection (docs/security.md): a key pair and the peer's public key(s), or a
// pre-shared key, or plaintext chosen explicitly. Nothing chosen is an error at Create.
struct Security {
  std::string key_file;       // this side's private key (longhaul-keygen --out=P writes P.key)
  std::string peer_key_file;  // client: the server's public key; server: the keys it allows
  std::string psk_file;       // a pre-shared key (longhaul-keygen --psk=FILE), both sides
  bool insecure = false;      // plaintext, on purpose
};

// Transport settings by the names of profile files and of the tools' flags (rate, cc,
// window, segment, fec, ...: docs/tuning.md lists them): a profile file first (e.g. one
// longhaul-tune wrote), then `values` in order; a later value overrides. Packet
// protection belongs to EndpointOptions::security: a profile that sets key, peer_key,
// psk_file or insecure is refused here. Empty: the defaults (cc=bbr, no rate cap).
struct Settings {
  std::string profile_file;
  std::vector<std::pair<std::string, std::string>> values;
};

struct EndpointOptions {
  Security security;
  std::string datapath = "udp";  // "udp", or "verbs" (RoCE v2, where built with rdma-core)
  uint32_t max_connections = 1024;  // a server's limit; more are rejected as busy
  // Socket buffers asked for; 0 derives them from the window (the kernel's caps apply:
  // net.core.rmem_max / wmem_max, raised by the longhaul package's sysctl snippet).
  uint64_t socket_buffer_bytes = 0;
  // Engines: driver threads, each running its share of the connections on a core of its
  // own; a listening port is shared by all of them. 0: one per CPU this process may use,
  // at most 8. More than 1 needs datapath "udp". With several, event callbacks of
  // different connections run on different threads at once.
  uint32_t engines = 1;
};

struct ListenOptions {
  Settings settings;      // for the accepted connections
  uint32_t backlog = 128;  // connections waiting for Accept; more are rejected as busy
};

struct ConnectOptions {
  Settings settings;
  std::chrono::milliseconds timeout{5000};  // for the handshake
  std::string app_data;  // opaque bytes the server sees (at most 900)
};

struct Event {
  enum class Type {
    kSendComplete,     // every byte of a sent message was acknowledged
    kReceiveComplete,  // a message arrived whole, in order (status says if it did not fit)
    kClosed,           // the connection ended; status says why
  };
  Type type = Type::kClosed;
  uint64_t message_id = 0;  // Send()'s id; for receives, consecutive from 0
  uint64_t tag = 0;         // Send()'s or PostReceive()'s tag (0: memory the event owns)
  uint64_t size = 0;        // message size in bytes
  absl::Status status;
  // kReceiveComplete: the message, in the posted buffer or in `storage`.
  const uint8_t* data = nullptr;
  // Memory the transport allocated for a message that found no posted buffer; it is the
  // application's, freed with the last copy of this pointer.
  std::shared_ptr<const void> storage;
  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(size)}; }
};

struct ConnectionInfo {
  std::string local_address;  // "127.0.0.1:40001"
  std::string peer_address;   // "127.0.0.1:5201"
  std::string peer_app_data;  // ConnectOptions::app_data of the client (server side)
  bool is_server = false;
  std::string security;  // "Noise IK (static keys)", "insecure (plaintext)", ...
  std::string cipher;    // "aes-256-gcm"; empty when plaintext
  std::string peer_key;  // the peer's public key (hex) when static keys authenticated it
  // The effective settings of this side after negotiation, as key=value pairs (the same
  // names as Settings; a profile file with these lines reproduces them).
  std::vector<std::pair<std::string, std::string>> settings;
};

struct ConnectionStats {
  uint64_t bytes_sent = 0;                // datagram bytes
  uint64_t bytes_received = 0;
  uint64_t data_bytes_sent = 0;           // message bytes, first transmissions
  uint64_t data_bytes_retransmitted = 0;
  uint64_t data_bytes_received = 0;       // new message bytes
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  uint64_t packets_lost = 0;              // declared lost by the sender
  uint64_t packets_retransmitted = 0;
  uint64_t fec_recovered_packets = 0;     // rebuilt by this side's FEC decoder
  uint64_t messages_sent = 0;             // send completions
  uint64_t messages_received = 0;
  std::chrono::nanoseconds smoothed_rtt{0};
  std::chrono::nanoseconds min_rtt{0};
  double pacing_rate_bps = 0;
};

class LONGHAUL_API Connection {
 public:
  // Closes the connection (as Close()) if the application did not.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Queues a message without copying it: `message` must stay valid and unchanged until
  // its kSendComplete event (or kClosed). Returns the message id (consecutive from 0).
  // Errors: FailedPrecondition once closing or closed.
  absl::StatusOr<uint64_t> Send(std::span<const uint8_t> message, uint64_t tag);
  // Queues a message the transport holds until it is acknowledged.
  absl::StatusOr<uint64_t> Send(std::vector<uint8_t> message, uint64_t tag);
  // Posts a buffer for the next message that has none; written until its
  // kReceiveComplete (a message larger than the buffer completes with an error status).
  absl::Status PostReceive(std::span<uint8_t> buffer, uint64_t tag);

  // Next event; false if none is queued.
  bool Poll(Event* event);
  // Waits up to `timeout` for an event; false on timeout, or once closed and drained.
  bool Wait(Event* event, std::chrono::nanoseconds timeout);
  // Every event goes to `callback` on the driver thread, in order, starting with those
  // still queued (nullptr: back to Poll/Wait). It must not block for long.
  void SetCallback(std::function<void(Event&)> callback);

  // Clean close: CLOSE to the peer; messages not yet acknowledged are cancelled (wait
  // for their kSendComplete first). kClosed follows.
  void Close();
  // Closes with an error the peer sees as the reason.
  void Abort(const std::string& reason);
  // True once the kClosed event was produced, within `timeout`.
  bool WaitClosed(std::chrono::nanoseconds timeout);
  bool closed() const;
  // OK while open; after kClosed, its status.
  absl::Status status() const;
  // Bytes accepted by Send and not yet transmitted once.
  uint64_t unsent_bytes() const;

  ConnectionInfo info() const;
  ConnectionStats stats() const;  // refreshed by the driver every few milliseconds

  struct Impl;

 private:
  friend class Endpoint;
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class LONGHAUL_API Endpoint {
 public:
  // Checks the options, reads the key files and starts the driver thread. Errors name
  // the problem: InvalidArgument (a bad option, contradictory keys), NotFound or
  // FailedPrecondition (a key file missing or readable by others).
  static absl::StatusOr<std::unique_ptr<Endpoint>> Create(const EndpointOptions& options);
  // Closes every connection and stops the driver thread.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Listens on a numeric address ("0.0.0.0", "127.0.0.1", "::") and port (0: any free
  // port); returns the port. Errors: InvalidArgument (address, settings), AlreadyExists
  // (the port is in use).
  absl::StatusOr<uint16_t> Listen(const std::string& address, uint16_t port,
                                  const ListenOptions& options);
  // Connects and returns once the handshake completed. Errors name the server and the
  // cause: NotFound (the name does not resolve), Unavailable (nothing listens),
  // DeadlineExceeded (no answer within the timeout), FailedPrecondition (rejected).
  absl::StatusOr<std::unique_ptr<Connection>> Connect(const std::string& host, uint16_t port,
                                                      const ConnectOptions& options);
  // The next accepted connection. DeadlineExceeded after `timeout`, Cancelled after Close.
  absl::StatusOr<std::unique_ptr<Connection>> Accept(std::chrono::nanoseconds timeout);
  // Closes every connection (each ends with kClosed, status Aborted "endpoint closed",
  // and its peer hears the same reason) and stops the driver thread. Idempotent.
  void Close();

  struct Impl;

 private:
  explicit Endpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace longhaul::api
