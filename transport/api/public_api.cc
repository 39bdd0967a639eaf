// The installed API (include/longhaul/endpoint.h) over the library's own Endpoint
// (transport/api/endpoint.h): options by name converted once here, handles wrapped so
// that no internal type crosses the shared library's boundary.
#include <utility>

#include "absl/strings/str_cat.h"
#include "longhaul/endpoint.h"
#include "transport/api/endpoint.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"
#include "transport/crypto/key_files.h"

namespace longhaul::api {
namespace {

Duration ToDuration(std::chrono::nanoseconds d) { return Duration::Nanoseconds(d.count()); }

// The settings' TransportConfig: the defaults, then the profile file, then the values.
absl::StatusOr<TransportConfig> ConfigFrom(const Settings& s) {
  TransportConfig c;
  if (!s.profile_file.empty()) {
    LH_ASSIGN_OR_RETURN(LoadedProfile p, LoadProfileFile(s.profile_file, c));
    if (p.security.any()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.profile_file, " sets packet protection (key, peer_key, psk_file or insecure): give it "
                          "in EndpointOptions::security instead"));
    }
    c = p.config;
  }
  for (const auto& [key, value] : s.values) {
    if (absl::Status st = ApplyProfileKey(&c, key, value); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("settings: ", st.message()));
    }
  }
  if (absl::Status st = c.Validate(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("settings: ", st.message()));
  }
  return c;
}

Event ToPublic(::longhaul::Event& e) {
  Event out;
  switch (e.type) {
    case ::longhaul::Event::Type::kSendComplete: out.type = Event::Type::kSendComplete; break;
    case ::longhaul::Event::Type::kReceiveComplete: out.type = Event::Type::kReceiveComplete; break;
    case ::longhaul::Event::Type::kClosed: out.type = Event::Type::kClosed; break;
    case ::longhaul::Event::Type::kOfferWithdrawn:  // never: this API offers no buffers
      break;
  }
  out.message_id = e.message_id;
  out.tag = e.tag;
  out.size = e.size;
  out.status = std::move(e.status);
  out.data = e.data;
  if (e.owned) {
    auto holder = std::make_shared<OwnedBuffer>(std::move(e.owned));
    out.data = holder->data();
    out.storage = std::shared_ptr<const void>(holder, holder->data());
  }
  return out;
}

}  // namespace

struct Connection::Impl {
  std::shared_ptr<ConnectionHandle> handle;
};

struct Endpoint::Impl {
  std::unique_ptr<::longhaul::Endpoint> endpoint;
};

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Connection::~Connection() {
  if (!impl_->handle->closed()) impl_->handle->Close();
}

absl::StatusOr<uint64_t> Connection::Send(std::span<const uint8_t> message, uint64_t tag) {
  SendBuffer b;
  b.data = message.data();
  b.size = message.size();
  return impl_->handle->Send(std::move(b), tag);
}

absl::StatusOr<uint64_t> Connection::Send(std::vector<uint8_t> message, uint64_t tag) {
  auto owner = std::make_shared<const std::vector<uint8_t>>(std::move(message));
  SendBuffer b;
  b.data = owner->data();
  b.size = owner->size();
  b.owner = owner;
  return impl_->handle->Send(std::move(b), tag);
}

absl::Status Connection::PostReceive(std::span<uint8_t> buffer, uint64_t tag) {
  return impl_->handle->PostReceive(buffer.data(), buffer.size(), tag);
}

bool Connection::Poll(Event* event) {
  ::longhaul::Event e;
  if (!impl_->handle->Poll(&e)) return false;
  *event = ToPublic(e);
  return true;
}

bool Connection::Wait(Event* event, std::chrono::nanoseconds timeout) {
  ::longhaul::Event e;
  if (!impl_->handle->Wait(&e, ToDuration(timeout))) return false;
  *event = ToPublic(e);
  return true;
}

void Connection::SetCallback(std::function<void(Event&)> callback) {
  if (!callback) {
    impl_->handle->SetCallback(nullptr);
    return;
  }
  impl_->handle->SetCallback([cb = std::move(callback)](::longhaul::Event& e) {
    Event out = ToPublic(e);
    cb(out);
  });
}

void Connection::Close() { impl_->handle->Close(); }

void Connection::Abort(const std::string& reason) { impl_->handle->Abort(reason); }

bool Connection::WaitClosed(std::chrono::nanoseconds timeout) {
  return impl_->handle->WaitClosed(ToDuration(timeout));
}

bool Connection::closed() const { return impl_->handle->closed(); }

absl::Status Connection::status() const { return impl_->handle->status(); }

uint64_t Connection::unsent_bytes() const { return impl_->handle->unsent_bytes(); }

ConnectionInfo Connection::info() const {
  const ::longhaul::ConnectionInfo& i = impl_->handle->info();
  ConnectionInfo out;
  out.local_address = i.local_address;
  out.peer_address = i.peer_address;
  out.peer_app_data = i.peer_app_data;
  out.is_server = i.is_server;
  out.security = i.security;
  out.cipher = i.cipher;
  out.peer_key = i.peer_key;
  out.settings = ProfileKeyValues(i.config);
  return out;
}

ConnectionStats Connection::stats() const {
  const ::longhaul::ConnectionStats s = impl_->handle->stats();
  const ConnectionDebugState d = impl_->handle->debug_state();
  ConnectionStats out;
  out.bytes_sent = s.bytes_sent;
  out.bytes_received = s.bytes_received;
  out.data_bytes_sent = s.data_bytes_sent;
  out.data_bytes_retransmitted = s.data_bytes_retransmitted;
  out.data_bytes_received = s.data_bytes_received;
  out.packets_sent = s.packets_sent;
  out.packets_received = s.packets_received;
  out.packets_lost = s.packets_lost;
  out.packets_retransmitted = s.packets_retransmitted;
  out.fec_recovered_packets = s.fec_recovered_packets;
  out.messages_sent = s.messages_sent;
  out.messages_received = s.messages_received;
  out.smoothed_rtt = std::chrono::nanoseconds(d.srtt.ns());
  out.min_rtt = std::chrono::nanoseconds(d.min_rtt.ns());
  out.pacing_rate_bps = d.pacing_rate.bps();
  return out;
}

absl::StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(const EndpointOptions& options) {
  ::longhaul::EndpointOptions eo;
  absl::StatusOr<Datapath> datapath = ParseDatapath(options.datapath);
  if (!datapath.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("datapath: ", datapath.status().message()));
  }
  eo.datapath = *datapath;
  eo.max_connections = options.max_connections;
  eo.socket_buffer = options.socket_buffer_bytes;
  eo.engines = options.engines;
  crypto::KeyChoice choice;
  const Security& s = options.security;
  if (!s.key_file.empty()) choice.key = {s.key_file, "security.key_file"};
  if (!s.peer_key_file.empty()) choice.peer_key = {s.peer_key_file, "security.peer_key_file"};
  if (!s.psk_file.empty()) choice.psk_file = {s.psk_file, "security.psk_file"};
  if (s.insecure) {
    choice.insecure = true;
    choice.insecure_source = "security.insecure";
  }
  crypto::KeyChoiceNames names;
  names.key = "security.key_file";
  names.peer_key = "security.peer_key_file";
  names.psk_file = "security.psk_file";
  names.insecure = "security.insecure";
  LH_ASSIGN_OR_RETURN(crypto::LoadedKeys keys, crypto::LoadKeys(choice, names));
  eo.security = std::move(keys.security);
  LH_ASSIGN_OR_RETURN(std::unique_ptr<::longhaul::Endpoint> ep, ::longhaul::Endpoint::Create(eo));
  auto impl = std::make_unique<Impl>();
  impl->endpoint = std::move(ep);
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl)));
}

Endpoint::Endpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Endpoint::~Endpoint() { Close(); }

absl::StatusOr<uint16_t> Endpoint::Listen(const std::string& address, uint16_t port,
                                          const ListenOptions& options) {
  LH_ASSIGN_OR_RETURN(TransportConfig config, ConfigFrom(options.settings));
  ::longhaul::ListenOptions lo;
  lo.config = std::move(config);
  lo.backlog = options.backlog;
  return impl_->endpoint->Listen(address, port, std::move(lo));
}

absl::StatusOr<std::unique_ptr<Connection>> Endpoint::Connect(const std::string& host,
                                                              uint16_t port,
                                                              const ConnectOptions& options) {
  LH_ASSIGN_OR_RETURN(TransportConfig config, ConfigFrom(options.settings));
  ::longhaul::ConnectOptions co;
  co.config = std::move(config);
  co.timeout = ToDuration(options.timeout);
  co.app_data = options.app_data;
  LH_ASSIGN_OR_RETURN(std::shared_ptr<ConnectionHandle> h,
                      impl_->endpoint->Connect(host, port, std::move(co)));
  auto impl = std::make_unique<Connection::Impl>();
  impl->handle = std::move(h);
  return std::unique_ptr<Connection>(new Connection(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Connection>> Endpoint::Accept(std::chrono::nanoseconds timeout) {
  LH_ASSIGN_OR_RETURN(std::shared_ptr<ConnectionHandle> h,
                      impl_->endpoint->Accept(ToDuration(timeout)));
  auto impl = std::make_unique<Connection::Impl>();
  impl->handle = std::move(h);
  return std::unique_ptr<Connection>(new Connection(std::move(impl)));
}

void Endpoint::Close() { impl_->endpoint->Close(); }

}  // namespace longhaul::api
