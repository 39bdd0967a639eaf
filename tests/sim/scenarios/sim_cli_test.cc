// longhaul-sim from the command line: --deliveries writes one line per delivered message;
// a path that cannot be written is refused before the run; the JSON result has the run's
// wall and CPU time, read on the tool's clocks, which also bound it (--max_wall_time);
// --nodes=endpoint runs whole endpoints and reports the handshake and the sealing.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_command.h"

namespace longhaul {
namespace {

using testing::RunCommand;

// longhaul-sim over a 1 Gbit/s link with a 10 ms RTT, then `args`.
testing::CommandOutput RunSim(const std::string& args) {
  return RunCommand(absl::StrCat(LONGHAUL_SIM_BIN, " --link=rate=1gbit,rtt=10ms ", args), 60);
}

TEST(SimCliTest, DeliveriesWritesEachMessage) {
  const std::string path = ::testing::TempDir() + "/sim_cli_deliveries.csv";
  const auto o = RunSim(absl::StrCat("--workload=messages --message_size=1MiB --messages=3",
                                     " --payload=off --deliveries=", path, " >/dev/null"));
  ASSERT_EQ(o.status, 0);
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "connection,index,size,submit_s,done_s,mct_s");
  int rows = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    ASSERT_EQ(f.size(), 6u) << line;
    EXPECT_EQ(f[0], "0");
    EXPECT_EQ(f[1], std::to_string(rows));
    EXPECT_EQ(f[2], "1048576");
    const double submit = std::stod(f[3]), done = std::stod(f[4]), mct = std::stod(f[5]);
    // At least the one-way delay and the serialisation of 1 MiB at 1 Gbit/s.
    EXPECT_GT(mct, 0.005 + 0.008);
    EXPECT_NEAR(done - submit, mct, 1e-6);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
}

TEST(SimCliTest, DeliveriesToAPathThatCannotBeWrittenIsAUsageError) {
  const auto o = RunSim(
      "--workload=messages --message_size=1MiB --messages=3"
      " --deliveries=/nonexistent-dir/x.csv 2>&1");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("--deliveries: cannot write /nonexistent-dir/x.csv"), std::string::npos)
      << o.out;
}

TEST(SimCliTest, JsonReportsWallAndCpuTime) {
  const auto o =
      RunSim("--workload=messages --message_size=1MiB --messages=3 --payload=off --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  const nlohmann::json& r = j.at("result");
  EXPECT_EQ(r.at("stop_reason"), "done");
  EXPECT_GT(r.at("wall_s").get<double>(), 0);
  EXPECT_GT(r.at("cpu_s").get<double>(), 0);
  EXPECT_GT(r.at("sim_packets_per_wall_s").get<double>(), 0);
  EXPECT_GT(r.at("sim_packets_per_cpu_s").get<double>(), 0);
  EXPECT_EQ(j.at("scenario").at("max_wall_time_s"), 600);
}

TEST(SimCliTest, MaxWallTimeStopsTheRun) {
  const auto o = RunSim("--bytes=1GiB --payload=off --max_wall_time=1ns --json");
  EXPECT_EQ(o.status, 1) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("result").at("stop_reason"), "max_wall_time");
}

TEST(SimCliTest, EndpointNodesReportTheHandshakeAndSealing) {
  const auto o = RunSim("--bytes=8MiB --nodes=endpoint --security=keys --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j.at("scenario").at("nodes"), "endpoint");
  EXPECT_EQ(j.at("scenario").at("security"), "keys");
  const nlohmann::json& r = j.at("result");
  EXPECT_EQ(r.at("nodes"), "endpoint");
  EXPECT_EQ(r.at("security"), "keys");
  EXPECT_TRUE(r.at("delivered_intact").get<bool>());
  // Hello, Retry, Hello with the cookie, Accept: two 10 ms round trips.
  EXPECT_GE(r.at("handshake_s").get<double>(), 0.020);
  EXPECT_LT(r.at("handshake_s").get<double>(), 0.025);
  EXPECT_GT(r.at("client_endpoint").at("packets_sealed").get<uint64_t>(), 0u);
  EXPECT_GT(r.at("server_endpoint").at("packets_opened").get<uint64_t>(), 0u);
  EXPECT_EQ(r.at("server_endpoint").at("connections_accepted"), 1);
}

TEST(SimCliTest, ConnectionNodesKeepTheirJson) {
  const auto o = RunSim("--bytes=1MiB --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_FALSE(j.at("scenario").contains("nodes"));
  EXPECT_FALSE(j.at("result").contains("handshake_s"));
}

TEST(SimCliTest, BadNodeFlagsAreUsageErrors) {
  auto o = RunSim("--bytes=1MiB --security=psk 2>&1");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("--security needs --nodes=endpoint"), std::string::npos) << o.out;
  o = RunSim("--bytes=1MiB --nodes=socket 2>&1");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("--nodes: unknown 'socket'"), std::string::npos) << o.out;
  o = RunSim("--bytes=1MiB --nodes=endpoint --security=rot13 2>&1");
  EXPECT_EQ(o.status, 2);
  o = RunSim("--bytes=1MiB --nodes=endpoint --payload=off 2>&1");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("endpoint nodes carry whole payloads"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace longhaul
