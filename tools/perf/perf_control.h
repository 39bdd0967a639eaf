// longhaul-perf's control messages: kControlMagic followed by one JSON object with a
// "type". They travel as ordinary messages on the test's connections, in order with the
// data:
//   request  client -> server, the first message of every connection: the test
//   report   server -> client, every interval: the server's counters so far
//   end      data sender -> receiver, after the last data message: the sender's counters
//   result   receiver -> sender, answering end: bytes verified (or, with verify off, only
//            received), corruption, completion times, the receiver's counters
//   final    server -> client in reverse tests, answering result: the server's (sender's)
//            final counters
// docs/perf.md lists the fields.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "transport/core/stats.h"

namespace longhaul::perf {

// The test a client asks for (the request message).
struct TestRequest {
  std::string test_id;   // random, hex; groups the connections of one test
  uint32_t stream = 0;   // 0-based index of this connection in the test
  uint32_t streams = 1;  // --parallel
  bool reverse = false;  // the server sends
  double time_s = 10;    // test length when bytes == 0
  uint64_t bytes = 0;    // bytes per stream to send, when > 0
  uint64_t message_size = 1 << 20;
  std::string workload = "bulk";  // bulk | messages
  double load = 0.5;              // messages: fraction of rate_bps offered by the whole test
  double rate_bps = 1e9;          // the link rate the test assumes; 0: none (cc=bbr, no cap)
  double interval_s = 1;
  std::string version;  // client's version string
  // --verify: the sender fills every message with the pattern and the receiver checks it
  // (true), or neither (false: CPU measurements, as iperf3). Optional in the JSON
  // ("verify"; absent: true, a client from before the flag).
  bool verify = true;
};

inline constexpr uint64_t kMinMessageSize = 64;
inline constexpr uint64_t kMaxMessageSize = uint64_t{64} << 20;
// The largest control message a side accepts.
inline constexpr size_t kMaxControlMessage = size_t{1} << 20;

// Encodes `j` as a control message (magic + JSON text).
std::string EncodeControl(const nlohmann::json& j);
// True if `data` starts with the control magic.
bool IsControl(const uint8_t* data, size_t size);
// Parses a control message. Errors: InvalidArgument naming the problem.
absl::StatusOr<nlohmann::json> DecodeControl(const uint8_t* data, size_t size);

nlohmann::json RequestToJson(const TestRequest& r);
// Parses and range-checks a request; errors name the field ("message_size=3 is outside
// [64, 67108864]"). `max_time_s` bounds time_s.
absl::StatusOr<TestRequest> RequestFromJson(const nlohmann::json& j, double max_time_s);

ConnectionStats StatsFromJson(const nlohmann::json& j);
nlohmann::json DebugToJson(const ConnectionDebugState& d);

}  // namespace longhaul::perf
