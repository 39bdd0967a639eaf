// The UDP driver's batch socket on 127.0.0.1: open/bind errors, a batch sent with
// sendmmsg (GSO where the kernel has it) arriving whole with its ECN marks and sources,
// and the counters. Waits are poll() with a bound, never sleeps.
#include "transport/net/udp_socket.h"

#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "gtest/gtest.h"

namespace longhaul::net {
namespace {

SocketAddress Loopback(uint16_t port) { return *SocketAddress::FromNumeric("127.0.0.1", port); }

std::unique_ptr<UdpSocket> OpenOrDie(boost::asio::io_context& io, const SocketAddress& bind,
                                     const SocketAddress& connect_to = {},
                                     SocketOptions options = {}) {
  absl::StatusOr<std::unique_ptr<UdpSocket>> s = UdpSocket::Open(io, bind, connect_to, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Receives until `want` datagrams arrived or a 5 s poll finds nothing more.
std::vector<std::string> ReceiveAll(UdpSocket& s, RxBatch& batch, size_t want,
                                    std::vector<Ecn>* ecn, std::vector<SocketAddress>* from) {
  std::vector<std::string> got;
  while (got.size() < want) {
    pollfd p{s.fd(), POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) break;
    RecvResult r = s.Receive(&batch);
    EXPECT_TRUE(r.error.ok()) << r.error;
    for (const RxDatagram& d : batch.datagrams()) {
      got.emplace_back(reinterpret_cast<const char*>(d.data.data()), d.data.size());
      ecn->push_back(d.ecn);
      from->push_back(batch.source(d.source));
    }
  }
  return got;
}

TEST(UdpSocketTest, OpensBoundAndConnected) {
  boost::asio::io_context io;
  std::unique_ptr<UdpSocket> server = OpenOrDie(io, Loopback(0));
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->local_address().is_loopback());
  EXPECT_NE(server->local_address().port(), 0);
  EXPECT_FALSE(server->connected());
  std::unique_ptr<UdpSocket> client = OpenOrDie(io, Loopback(0), server->local_address());
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(client->peer_address(), server->local_address());
  EXPECT_GT(server->info().recv_buffer, 0u);
  EXPECT_GT(server->info().send_buffer, 0u);
}

TEST(UdpSocketTest, BindErrorsSayWhy) {
  boost::asio::io_context io;
  std::unique_ptr<UdpSocket> first = OpenOrDie(io, Loopback(0));
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<UdpSocket>> again =
      UdpSocket::Open(io, first->local_address(), SocketAddress(), SocketOptions());
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("address already in use"), std::string::npos);
  absl::StatusOr<std::unique_ptr<UdpSocket>> none =
      UdpSocket::Open(io, SocketAddress(), SocketAddress(), SocketOptions());
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(none.status())) << none.status();
}

TEST(UdpSocketTest, BatchArrivesWholeWithEcnAndSource) {
  for (bool offload : {true, false}) {
    SCOPED_TRACE(offload ? "GSO/GRO where available" : "no offload");
    boost::asio::io_context io;
    SocketOptions o;
    o.gso = o.gro = offload;
    std::unique_ptr<UdpSocket> rx = OpenOrDie(io, Loopback(0), SocketAddress(), o);
    std::unique_ptr<UdpSocket> tx = OpenOrDie(io, Loopback(0), SocketAddress(), o);
    ASSERT_NE(rx, nullptr);
    ASSERT_NE(tx, nullptr);
    const SocketAddress dest = rx->local_address();
    // Ten equal datagrams (one GSO run), a shorter one ending it, then three CE-marked.
    std::vector<std::string> payloads;
    std::vector<TxDatagram> batch;
    for (int i = 0; i < 14; ++i) {
      payloads.push_back(std::string(i == 10 ? 300 : 1200, static_cast<char>('a' + i)));
    }
    for (int i = 0; i < 14; ++i) {
      batch.push_back(TxDatagram{reinterpret_cast<const uint8_t*>(payloads[i].data()),
                                 static_cast<uint32_t>(payloads[i].size()),
                                 i < 11 ? Ecn::kEct0 : Ecn::kCe, &dest});
    }
    SendResult sr = tx->Send(batch);
    ASSERT_TRUE(sr.error.ok()) << sr.error;
    ASSERT_EQ(sr.sent, batch.size());
    if (offload && tx->info().gso) {
      EXPECT_GE(tx->gso_messages(), 1u);
    } else {
      EXPECT_EQ(tx->gso_messages(), 0u);
    }
    RxBatch rb(8);
    std::vector<Ecn> ecn;
    std::vector<SocketAddress> from;
    std::vector<std::string> got = ReceiveAll(*rx, rb, payloads.size(), &ecn, &from);
    ASSERT_EQ(got, payloads);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(ecn[i], i < 11 ? Ecn::kEct0 : Ecn::kCe) << i;
      EXPECT_EQ(from[i], tx->local_address()) << i;
    }
    if (!offload) {
      EXPECT_EQ(rx->gro_messages(), 0u);
    }
  }
}

TEST(UdpSocketTest, ConnectedSocketReportsRefusal) {
  boost::asio::io_context io;
  SocketAddress closed;
  {
    std::unique_ptr<UdpSocket> gone = OpenOrDie(io, Loopback(0));
    ASSERT_NE(gone, nullptr);
    closed = gone->local_address();
  }  // nothing listens on `closed` any more
  std::unique_ptr<UdpSocket> c = OpenOrDie(io, Loopback(0), closed);
  ASSERT_NE(c, nullptr);
  const uint8_t byte = 1;
  absl::Status refused;
  // The ICMP port unreachable of one datagram surfaces on a later call.
  for (int i = 0; i < 50 && refused.ok(); ++i) {
    SendResult s = c->Send(std::vector<TxDatagram>{TxDatagram{&byte, 1, Ecn::kNotEct, nullptr}});
    refused = s.error;
    if (refused.ok()) {
      pollfd p{c->fd(), POLLIN | POLLERR, 0};
      poll(&p, 1, 100);
      RxBatch rb(1);
      refused = c->Receive(&rb).error;
    }
  }
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("connection refused by " + closed.ToString()), std::string::npos)
      << refused;
}

}  // namespace
}  // namespace longhaul::net
