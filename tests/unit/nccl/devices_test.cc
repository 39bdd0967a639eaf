#include "transport/nccl/devices.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::nccl {
namespace {

using ::testing::HasSubstr;

std::vector<Interface> Machine() {
  return {{"lo", "127.0.0.1", true},
          {"eth0", "198.18.0.1", false},
          {"eth1", "198.18.1.1", false},
          {"docker0", "172.17.0.1", false},
          {"ib0", "198.19.0.1", false}};
}

std::vector<std::string> Names(const absl::StatusOr<std::vector<Interface>>& ifs) {
  std::vector<std::string> out;
  if (ifs.ok()) {
    for (const Interface& i : *ifs) out.push_back(i.name);
  }
  return out;
}

TEST(NcclDevicesTest, InterfaceListSyntaxIsNccls) {
  EXPECT_TRUE(MatchesInterfaceList("eth0", "eth"));
  EXPECT_TRUE(MatchesInterfaceList("ib0", "eth,ib"));
  EXPECT_FALSE(MatchesInterfaceList("lo", "eth,ib"));
  EXPECT_TRUE(MatchesInterfaceList("eth0", "=eth0"));
  EXPECT_FALSE(MatchesInterfaceList("eth01", "=eth0"));
  EXPECT_FALSE(MatchesInterfaceList("docker0", "^docker"));
  EXPECT_TRUE(MatchesInterfaceList("eth0", "^docker"));
  EXPECT_FALSE(MatchesInterfaceList("docker0", "^=docker0"));
  EXPECT_TRUE(MatchesInterfaceList("docker01", "^=docker0"));
  EXPECT_FALSE(MatchesInterfaceList("eth0", ",,"));
}

TEST(NcclDevicesTest, DefaultIsTheFirstNonLoopbackElseLoopback) {
  EXPECT_EQ(Names(SelectInterfaces(Machine(), "", "")), std::vector<std::string>{"eth0"});
  EXPECT_EQ(Names(SelectInterfaces({{"lo", "127.0.0.1", true}}, "", "")),
            std::vector<std::string>{"lo"});
}

TEST(NcclDevicesTest, AListSelectsEveryMatchInOrder) {
  EXPECT_EQ(Names(SelectInterfaces(Machine(), "eth", "NCCL_LONGHAUL_IFNAME")),
            (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(Names(SelectInterfaces(Machine(), "^docker,lo", "NCCL_LONGHAUL_IFNAME")),
            (std::vector<std::string>{"eth0", "eth1", "ib0"}));
}

TEST(NcclDevicesTest, NothingSelectedNamesTheVariableAndListsInterfaces) {
  absl::StatusOr<std::vector<Interface>> r =
      SelectInterfaces(Machine(), "=no-such-if0", "NCCL_SOCKET_IFNAME");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("NCCL_SOCKET_IFNAME==no-such-if0 matches no interface that is up"));
  EXPECT_THAT(r.status().message(), HasSubstr("lo (127.0.0.1), eth0 (198.18.0.1)"));
  r = SelectInterfaces({}, "", "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "no interface is up with an address; interfaces: none");
}

}  // namespace
}  // namespace longhaul::nccl
