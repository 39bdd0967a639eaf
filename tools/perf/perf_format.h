// iperf3-style number formatting for longhaul-perf's text output. Pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "transport/datapath/options.h"

namespace longhaul::perf {

// "1.16 GBytes", " 119 MBytes" (powers of 1024, like iperf3's transfer column).
std::string FormatTransfer(uint64_t bytes);
// "1.00 Gbits/sec", " 998 Mbits/sec" (powers of 1000).
std::string FormatBitrate(double bits_per_second);
// The verbs datapath's UC lanes in one line ("verbs uc: 1 lane(s) opened, 1540 chunks sent
// (100.6 MBytes), 3 received, ..."; docs/rdma.md 7.8); empty unless `o` runs qp_type uc.
std::string UcLine(const EndpointOptions& o, const EndpointStats& s);

}  // namespace longhaul::perf
