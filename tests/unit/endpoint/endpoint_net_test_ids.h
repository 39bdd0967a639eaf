// What the sans-IO endpoint tests over EndpointNet (endpoint_test.cc,
// endpoint_security_test.cc) share: the harness's names and the local ids they give the
// listening endpoint and the client.
#pragma once

#include "gmock/gmock.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/testing/endpoint_net.h"

namespace longhaul::endpoint::endpoint_net_test {

using ::longhaul::testing::EndpointNet;
using ::longhaul::testing::NetDatagram;
using ::longhaul::testing::NetVerdict;
using ::testing::HasSubstr;

inline constexpr LocalId kListen = 1;
inline constexpr LocalId kClient = 10;

}  // namespace longhaul::endpoint::endpoint_net_test
