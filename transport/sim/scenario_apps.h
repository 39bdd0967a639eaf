// Internal to the scenario runner (scenario.cc and its endpoint mode, scenario_endpoint.cc):
// the per-pair workload record, the sender and receiver applications, and the node
// interface both kinds of scenario node implement. Not a public API.
//
// The applications work on a Connection whoever owns it: a bare Connection of a
// ConnectionNode, or one an endpoint::SansIoEndpoint established (EndpointScenarioNode).
// Message bytes are views into one shared read-only pattern (MakePattern); see scenario.h.
// Thread-safety: none (one simulator thread).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "transport/base/units.h"
#include "transport/core/connection.h"
#include "transport/sim/scenario.h"
#include "transport/sim/simulator.h"

namespace longhaul::sim::internal {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using HugeBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Memory advised to use transparent huge pages (cheap first touch for big buffers).
HugeBuffer AllocHuge(size_t bytes);

// The shared read-only pattern all messages are views into (`max_message` plus the
// largest shift).
HugeBuffer MakePattern(uint64_t seed, ByteCount max_message);

// Where message k of pair `pair` starts in the pattern.
uint64_t Shift(int pair, uint64_t k);

// Shared between the two apps of a pair.
struct PairState {
  int index = 0;
  // When the workload starts: the pair's start (i x stagger); with endpoint nodes, the
  // time the client's handshake completed.
  Time start;
  uint64_t total_messages = 0;
  std::vector<ByteCount> sizes;    // per message (bulk: last may be short)
  std::vector<uint64_t> sent_ids;  // Connection's id for message k
  std::vector<Time> submit_times;  // messages workload
  std::vector<double> mct_s;       // messages workload
  std::vector<DeliveryRecord> deliveries;
  ConnectionResult result;
  bool finished = false;          // complete or failed
  int* finished_pairs = nullptr;  // scenario-wide count of finished pairs
};

void MarkFinished(PairState* pair);
// Records the pair's first error (later ones are dropped) and finishes it.
void Fail(PairState* pair, std::string why);

class App {
 public:
  virtual ~App() = default;
  virtual Time NextWake() const = 0;
  virtual void OnWake(Time now, Connection& conn) = 0;
  virtual void OnEvent(Time now, Connection& conn, Event& ev) = 0;
};

// A greedy bulk sender or an open-loop message sender (ScenarioOptions::workload).
class SenderApp final : public App {
 public:
  SenderApp(const ScenarioOptions& opt, PairState* pair, const uint8_t* pattern, Duration interval);

  Time NextWake() const override;
  void OnWake(Time now, Connection& conn) override;
  void OnEvent(Time now, Connection& conn, Event& ev) override;

 private:
  Time SubmitTime(uint64_t k) const;
  void Fill(Time now, Connection& conn);
  void Submit(Connection& conn, uint64_t k);

  const ScenarioOptions& opt_;
  PairState* pair_;
  const uint8_t* pattern_;
  Duration interval_;
  bool started_ = false;
  uint64_t next_ = 0;
  ByteCount outstanding_ = 0;
  ByteCount target_outstanding_ = 0;
};

// Posts a recycled pool of receive buffers and verifies every delivered message.
class ReceiverApp final : public App {
 public:
  ReceiverApp(const ScenarioOptions& opt, PairState* pair, const uint8_t* pattern);

  // Posts the initial buffers (before any data can arrive).
  void Start(Connection& conn);

  Time NextWake() const override { return Time::Infinite(); }
  void OnWake(Time, Connection&) override {}
  void OnEvent(Time now, Connection& conn, Event& ev) override;

 private:
  void Post(Connection& conn, size_t i);
  void Verify(Time now, const Event& ev);

  PairState* pair_;
  const uint8_t* pattern_;
  Workload workload_;
  bool payload_;
  ByteCount buffer_size_ = 0;
  uint64_t pool_limit_ = 0;
  uint64_t posted_ = 0;
  uint64_t received_ = 0;
  std::vector<HugeBuffer> buffers_;
};

// One side of a pair as the scenario sees it: the simulator node and (once it exists) the
// Connection its application uses. A ConnectionNode is both; an EndpointScenarioNode
// (scenario_endpoint.h) reaches its connection through its endpoint.
class ScenarioSide {
 public:
  virtual ~ScenarioSide() = default;
  virtual SimNode* node() = 0;
  // Null until the connection exists (endpoint nodes: before the handshake completed).
  virtual const Connection* connection() const = 0;
  // The endpoint's figures (endpoint nodes; zeros for a bare connection).
  virtual EndpointSideStats endpoint_stats() const { return {}; }
};

}  // namespace longhaul::sim::internal
