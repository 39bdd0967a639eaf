// The installed API (include/longhaul/endpoint.h) through liblonghaul.so itself: only
// the exported symbols are reachable from here, so this also shows the library exports
// what an application needs. Loopback only.
#include <sys/stat.h>

#include <future>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "longhaul/longhaul.h"

namespace {

using ::testing::HasSubstr;
using namespace longhaul::api;
using std::chrono::seconds;

class PublicApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("longhaul-public-api-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    psk_ = Write("link.psk", "3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a3f2a9c0d1e2b4f5a\n",
                 0600);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  EndpointOptions Psk() const {
    EndpointOptions o;
    o.security.psk_file = psk_;
    return o;
  }

  std::filesystem::path dir_;
  std::string psk_;
};

TEST_F(PublicApiTest, VersionSaysWhatWasBuilt) {
  EXPECT_FALSE(longhaul::Version().empty());
  EXPECT_EQ(longhaul::WireVersion(), 1u);
  const std::string line = longhaul::VersionLine("app");
  EXPECT_EQ(line.rfind("app " + std::string(longhaul::Version()) + " (git ", 0), 0u) << line;
  EXPECT_THAT(line, HasSubstr(", wire protocol 1)"));
}

TEST_F(PublicApiTest, ErrorsNameTheProblem) {
  auto none = Endpoint::Create(EndpointOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("security.psk_file"));

  EndpointOptions bad = Psk();
  bad.datapath = "carrier-pigeon";
  auto dp = Endpoint::Create(bad);
  ASSERT_FALSE(dp.ok());
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dp.status().message()), HasSubstr("datapath"));

  EndpointOptions open_key = Psk();
  open_key.security.psk_file = Write("open.psk", std::string(64, 'a') + "\n", 0644);
  auto perm = Endpoint::Create(open_key);
  ASSERT_FALSE(perm.ok());
  EXPECT_THAT(std::string(perm.status().message()), HasSubstr("open.psk"));

  auto ep = Endpoint::Create(Psk());
  ASSERT_TRUE(ep.ok()) << ep.status();
  ListenOptions lo;
  lo.settings.values = {{"windw", "1GiB"}};
  auto l = (*ep)->Listen("127.0.0.1", 0, lo);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("unknown key 'windw'"));

  lo.settings.values = {{"rate", "12 apples"}};
  l = (*ep)->Listen("127.0.0.1", 0, lo);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("rate"));

  // Packet protection is the endpoint's: a profile that chooses it is refused.
  lo.settings = {};
  lo.settings.profile_file = Write("keys.profile", "rate=1gbit\ninsecure=true\n", 0644);
  l = (*ep)->Listen("127.0.0.1", 0, lo);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("EndpointOptions::security"));

  lo.settings.profile_file = (dir_ / "missing.profile").string();
  l = (*ep)->Listen("127.0.0.1", 0, lo);
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(std::string(l.status().message()), HasSubstr("missing.profile"));

  auto a = (*ep)->Accept(std::chrono::milliseconds(1));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(PublicApiTest, MessagesBothWaysWithSettingsAndStats) {
  auto server = Endpoint::Create(Psk());
  ASSERT_TRUE(server.ok()) << server.status();
  ListenOptions lo;
  lo.settings.profile_file = Write("ts.profile", "# a tuned profile\nrate=800mbit\ncc=fixed\n",
                                   0644);
  auto port = (*server)->Listen("127.0.0.1", 0, lo);
  ASSERT_TRUE(port.ok()) << port.status();

  auto client = Endpoint::Create(Psk());
  ASSERT_TRUE(client.ok()) << client.status();
  ConnectOptions co;
  co.settings.values = {{"rate", "1gbit"}, {"cc", "fixed"}, {"segment", "4KiB"}};
  co.app_data = "hello";
  auto c = (*client)->Connect("127.0.0.1", *port, co);
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = (*server)->Accept(seconds(10));
  ASSERT_TRUE(s.ok()) << s.status();

  // The client's settings are what it asked for; the server saw its app data.
  const ConnectionInfo ci = (*c)->info();
  EXPECT_FALSE(ci.is_server);
  EXPECT_THAT(ci.security, HasSubstr("pre-shared"));
  EXPECT_EQ(ci.cipher, "aes-256-gcm");
  std::string settings;
  for (const auto& [k, v] : ci.settings) settings += k + "=" + v + " ";
  EXPECT_THAT(settings, HasSubstr(" rate=1gbit "));
  EXPECT_THAT(settings, HasSubstr("cc=fixed "));
  EXPECT_EQ((*s)->info().peer_app_data, "hello");
  EXPECT_TRUE((*s)->info().is_server);

  // Client -> server: one message without a copy, one the transport holds; the server
  // posts a buffer for the first and takes the second in memory the event owns.
  std::vector<uint8_t> first(100000), second(300000);
  for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < second.size(); ++i) second[i] = static_cast<uint8_t>(i * 13 + 1);
  const std::vector<uint8_t> second_copy = second;
  std::vector<uint8_t> posted(first.size());
  ASSERT_TRUE((*s)->PostReceive(posted, /*tag=*/77).ok());
  auto id0 = (*c)->Send(std::span<const uint8_t>(first), /*tag=*/1);
  auto id1 = (*c)->Send(std::move(second), /*tag=*/2);
  ASSERT_TRUE(id0.ok() && id1.ok());
  EXPECT_EQ(*id0, 0u);
  EXPECT_EQ(*id1, 1u);

  std::vector<Event> got;
  Event e;
  while (got.size() < 2 && (*s)->Wait(&e, seconds(10))) {
    if (e.type == Event::Type::kReceiveComplete) got.push_back(e);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].status.ok()) << got[0].status;
  EXPECT_EQ(got[0].tag, 77u);
  EXPECT_EQ(got[0].data, posted.data());
  EXPECT_EQ(posted, first);
  EXPECT_EQ(got[1].tag, 0u);
  EXPECT_NE(got[1].storage, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(got[1].bytes().begin(), got[1].bytes().end()), second_copy);

  int completes = 0;
  while (completes < 2 && (*c)->Wait(&e, seconds(10))) {
    if (e.type == Event::Type::kSendComplete) {
      EXPECT_TRUE(e.status.ok()) << e.status;
      ++completes;
    }
  }
  EXPECT_EQ(completes, 2);

  // Server -> client through a callback on the client.
  std::promise<std::vector<uint8_t>> delivered;
  (*c)->SetCallback([&](Event& ev) {
    if (ev.type == Event::Type::kReceiveComplete) {
      delivered.set_value(std::vector<uint8_t>(ev.bytes().begin(), ev.bytes().end()));
    }
  });
  ASSERT_TRUE((*s)->Send(std::vector<uint8_t>(5000, 9), 3).ok());
  std::future<std::vector<uint8_t>> f = delivered.get_future();
  ASSERT_EQ(f.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get(), std::vector<uint8_t>(5000, 9));
  while ((*s)->Wait(&e, seconds(10)) && e.type != Event::Type::kSendComplete) {
  }
  EXPECT_EQ(e.type, Event::Type::kSendComplete);

  // A clean close: both sides end with kClosed and an OK status.
  (*c)->SetCallback(nullptr);
  (*c)->Close();
  EXPECT_TRUE((*c)->WaitClosed(seconds(10)));
  EXPECT_TRUE((*s)->WaitClosed(seconds(10)));
  EXPECT_TRUE((*s)->closed());
  EXPECT_TRUE((*c)->status().ok()) << (*c)->status();
  EXPECT_TRUE((*s)->status().ok()) << (*s)->status();
  EXPECT_FALSE((*c)->Send(std::vector<uint8_t>(1), 4).ok());
  // Counters as the driver published them at the close.
  const ConnectionStats st = (*c)->stats();
  EXPECT_GE(st.data_bytes_sent, 400000u);
  EXPECT_GE(st.data_bytes_received, 5000u);
  EXPECT_GT(st.smoothed_rtt.count(), 0);
}

TEST_F(PublicApiTest, ClosingTheEndpointEndsItsConnections) {
  auto server = Endpoint::Create(Psk());
  ASSERT_TRUE(server.ok());
  auto port = (*server)->Listen("127.0.0.1", 0, ListenOptions{});
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = Endpoint::Create(Psk());
  ASSERT_TRUE(client.ok());
  auto c = (*client)->Connect("127.0.0.1", *port, ConnectOptions{});
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = (*server)->Accept(seconds(10));
  ASSERT_TRUE(s.ok()) << s.status();
  (*client)->Close();
  EXPECT_TRUE((*c)->WaitClosed(seconds(10)));
  EXPECT_FALSE((*c)->status().ok());
  EXPECT_THAT(std::string((*c)->status().message()), HasSubstr("endpoint closed"));
  // The peer hears the CLOSE and its reason.
  EXPECT_TRUE((*s)->WaitClosed(seconds(10)));
  EXPECT_THAT(std::string((*s)->status().message()), HasSubstr("endpoint closed"));
  // Handles outlive their endpoint without harm.
  client->reset();
  EXPECT_TRUE((*c)->closed());
}

}  // namespace

namespace {

// Engines through the installed API: a server with two engines serves four connections
// on one port, each message intact; a bad engine count is refused by name.
TEST_F(PublicApiTest, EnginesShareOnePort) {
  EndpointOptions so = Psk();
  so.engines = 2;
  auto server = Endpoint::Create(so);
  ASSERT_TRUE(server.ok()) << server.status();
  auto port = (*server)->Listen("127.0.0.1", 0, ListenOptions{});
  ASSERT_TRUE(port.ok()) << port.status();
  auto client = Endpoint::Create(so);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<std::unique_ptr<Connection>> clients, servers;
  for (int i = 0; i < 4; ++i) {
    auto c = (*client)->Connect("127.0.0.1", *port, ConnectOptions{});
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
    auto s = (*server)->Accept(seconds(10));
    ASSERT_TRUE(s.ok()) << s.status();
    servers.push_back(*std::move(s));
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(clients[i]->Send(std::vector<uint8_t>(70000, static_cast<uint8_t>(i + 1)), 1).ok());
  }
  // Accepts come in handshake order, not in connect order: match by content.
  std::vector<int> seen(4, 0);
  for (auto& s : servers) {
    Event e;
    while (s->Wait(&e, seconds(10)) && e.type != Event::Type::kReceiveComplete) {
    }
    ASSERT_EQ(e.type, Event::Type::kReceiveComplete);
    ASSERT_EQ(e.size, 70000u);
    const uint8_t v = e.bytes()[0];
    ASSERT_GE(v, 1);
    ASSERT_LE(v, 4);
    EXPECT_EQ(std::vector<uint8_t>(e.bytes().begin(), e.bytes().end()),
              std::vector<uint8_t>(70000, v));
    ++seen[v - 1];
  }
  EXPECT_EQ(seen, std::vector<int>(4, 1));

  EndpointOptions bad = Psk();
  bad.engines = 1000;
  auto refused = Endpoint::Create(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("engines=1000"));
}

}  // namespace
