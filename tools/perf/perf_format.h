// iperf3-style number formatting for longhaul-perf's text output. Pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace longhaul::perf {

// "1.16 GBytes", " 119 MBytes" (powers of 1024, like iperf3's transfer column).
std::string FormatTransfer(uint64_t bytes);
// "1.00 Gbits/sec", " 998 Mbits/sec" (powers of 1000).
std::string FormatBitrate(double bits_per_second);

}  // namespace longhaul::perf
