#include "transport/testing/loopback_relay.h"

#include <utility>

#include "glog/logging.h"
#include "transport/net/socket_address.h"

namespace longhaul::testing {

sim::LinkSpec LoopbackRelay::CleanLink() {
  sim::LinkSpec link;
  link.rate = Bandwidth::Gbps(100);
  link.queue = sim::QueueSize::Bytes(64 << 20);
  link.mtu = 65535;
  return link;
}

absl::StatusOr<std::unique_ptr<LoopbackRelay>> LoopbackRelay::Start(uint16_t server_port,
                                                                    const sim::LinkSpec& link) {
  emu::UdpRelayOptions o;
  o.link = link;
  absl::StatusOr<net::SocketAddress> listen = net::SocketAddress::FromNumeric("127.0.0.1", 0);
  absl::StatusOr<net::SocketAddress> forward =
      net::SocketAddress::FromNumeric("127.0.0.1", server_port);
  if (!listen.ok()) return listen.status();
  if (!forward.ok()) return forward.status();
  o.listen = *listen;
  o.forward = *forward;
  o.max_time = kMaxRun;
  absl::StatusOr<std::unique_ptr<emu::UdpRelay>> relay = emu::UdpRelay::Create(o);
  if (!relay.ok()) return relay.status();
  return std::unique_ptr<LoopbackRelay>(new LoopbackRelay(*std::move(relay), link));
}

LoopbackRelay::LoopbackRelay(std::unique_ptr<emu::UdpRelay> relay, sim::LinkSpec link)
    : relay_(std::move(relay)), link_(std::move(link)) {
  port_ = relay_->listen_address().port();
  thread_ = std::thread([this] { run_status_ = relay_->Run(); });
}

LoopbackRelay::~LoopbackRelay() {
  absl::StatusOr<emu::EmuStats> s = Stop();
  if (!s.ok()) LOG(ERROR) << "loopback relay: " << s.status();
}

void LoopbackRelay::Cut() {
  sim::LinkSpec cut = link_;
  cut.loss = 1;
  const absl::Status s = relay_->ChangeLink(cut);
  CHECK(s.ok()) << s;
}

absl::StatusOr<emu::EmuStats> LoopbackRelay::Stop() {
  if (!result_) {
    relay_->Stop();
    thread_.join();
    if (run_status_.ok()) {
      result_ = relay_->Stats();
    } else {
      result_ = run_status_;
    }
  }
  return *result_;
}

}  // namespace longhaul::testing
