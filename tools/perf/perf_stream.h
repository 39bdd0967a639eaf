// PerfStream: one connection of a longhaul-perf test, on either side, as sender or
// receiver of the data. Its logic runs in the connection's event callback on the driver
// thread (no hand-off per message): the bulk sender refills on every send completion,
// the receiver verifies every data message against the pattern (unless the test runs
// with --verify=off) and hands the memory back. A messages-workload sender has its own
// thread that submits on the open-loop schedule. The reporting thread reads the counters
// and calls Tick() periodically.
//
// Message flow on the connection (control messages are perf_control.h's):
//   client: request, then data (forward) ... end          server: reports ... result
//   reverse: the server sends data ... end, the client result, the server final.
// The client closes the connection once its last expected message arrived; the server's
// side of a stream ends with the connection's kClosed event.
//
// Thread-safety: OnEvent runs on the driver thread, Tick and the accessors on the
// reporting thread; state shared between them is atomic or under mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/perf/perf_control.h"
#include "tools/perf/perf_pattern.h"
#include "transport/api/endpoint.h"
#include "transport/datapath/connection_handle.h"

namespace longhaul::perf {

struct MctSummary {
  uint64_t count = 0;
  double mean_s = 0, p50_s = 0, p99_s = 0, p999_s = 0, max_s = 0;
};
MctSummary Summarize(std::vector<double> samples);
nlohmann::json MctToJson(const MctSummary& m);

// Zero copy (docs/rdma.md 7.14): the patterns the bulk workload sends from, each
// registered with the endpoint once (Endpoint::RegisterMemory), so that the verbs
// datapath's UC lanes send them without copying. Thread-safe.
class PatternRegions {
 public:
  explicit PatternRegions(Endpoint* ep) : ep_(ep) {}
  // The pattern's region; 0 (logged once) when the endpoint refused it: sends copy.
  uint64_t For(const std::shared_ptr<const Pattern>& p);
  Endpoint* endpoint() const { return ep_; }

 private:
  Endpoint* ep_;
  std::mutex mu_;
  std::vector<std::pair<std::shared_ptr<const Pattern>, uint64_t>> regions_;
  bool warned_ = false;
};

// Receive-side placement (docs/rdma.md 7.15): the receiver's own buffers, `count` of
// `size` bytes in one region registered with the endpoint, posted for the messages to
// come (PostReceive, tags kFirstTag..) and reposted as each one is handled, so that the
// verbs datapath can advertise them and the sender's NIC write payloads straight there.
class ReceiveBuffers {
 public:
  static constexpr uint64_t kFirstTag = 1000;
  // Null (logged) when the endpoint refuses the memory: messages arrive in its own.
  static std::unique_ptr<ReceiveBuffers> Create(Endpoint* ep, size_t size, uint32_t count);
  ~ReceiveBuffers();  // deregisters (after the connection closed)
  bool Owns(uint64_t tag) const { return tag >= kFirstTag && tag < kFirstTag + count_; }
  absl::Status PostAll(ConnectionHandle& h);
  absl::Status Repost(ConnectionHandle& h, uint64_t tag);

 private:
  ReceiveBuffers() = default;
  Endpoint* ep_ = nullptr;
  uint64_t region_ = 0;
  size_t size_ = 0;
  uint32_t count_ = 0;
  std::unique_ptr<uint8_t[]> mem_;
};

// A PatternRegions for `ep` where its datapath sends registered memory without copying
// (verbs with UC lanes) and `on` (--zero_copy), else null.
std::shared_ptr<PatternRegions> ZeroCopyRegions(Endpoint& ep, const EndpointOptions& o, bool on);

class PerfStream : public std::enable_shared_from_this<PerfStream> {
 public:
  struct Options {
    bool is_client = true;
    TestRequest request;           // client: the test; server: filled from the request
    double max_duration_s = 3600;  // server: a stream is aborted after this long
    Duration request_timeout = Duration::Seconds(10);  // server: first message deadline
    // Server: called (driver thread) when the request arrived and was accepted.
    std::function<void(PerfStream*)> on_request;
    // Zero copy: register what the bulk workload sends from (null: nothing registered).
    std::shared_ptr<PatternRegions> regions;
  };

  PerfStream(std::shared_ptr<ConnectionHandle> handle, Options options);
  ~PerfStream();

  // Sets the handle's callback. Call once, before any event (on_accept / Connect).
  void Attach();
  // Client: sends the request and, in forward tests, starts sending data.
  void Begin();
  // Reporting thread: time limits, server reports, deadlines.
  void Tick();
  // Stops the scheduler thread (if any) and drops the callback. Never from the driver
  // thread. Idempotent.
  void Shutdown();

  // ---- state for reporting ----
  bool is_client() const { return opt_.is_client; }
  bool sender() const;
  bool has_request() const { return has_request_.load(); }
  const TestRequest& request() const { return opt_.request; }  // after has_request()
  bool complete() const { return complete_.load(); }           // client: every result is in
  bool closed() const { return closed_.load(); }
  std::string error() const;  // first failure, "" if none
  ConnectionHandle& handle() { return *handle_; }
  int64_t start_ns() const { return start_ns_.load(); }

  // Sender: data bytes acknowledged (send complete), and when sending started/ended.
  uint64_t bytes_acked() const { return bytes_acked_.load(); }
  int64_t first_send_ns() const { return first_send_ns_.load(); }
  int64_t last_ack_ns() const { return last_ack_ns_.load(); }
  // Receiver: verified data bytes, all data bytes, corrupt messages, arrival span.
  uint64_t bytes_verified() const { return bytes_verified_.load(); }
  uint64_t bytes_received() const { return bytes_received_.load(); }
  // The bytes that count as delivered: verified ones, or with --verify=off (nothing
  // checked) every data byte received.
  uint64_t bytes_delivered() const {
    return opt_.request.verify ? bytes_verified() : bytes_received();
  }
  // --verify: whether this test fills and checks the payload (after has_request()).
  bool verify() const { return opt_.request.verify; }
  uint64_t messages_verified() const { return messages_verified_.load(); }
  uint64_t corrupt_messages() const { return corrupt_messages_.load(); }
  int64_t first_data_ns() const { return first_data_ns_.load(); }
  int64_t last_data_ns() const { return last_data_ns_.load(); }
  uint64_t late_submissions() const { return late_submissions_.load(); }
  // Sender: data bytes submitted and not yet acknowledged.
  uint64_t outstanding() const;

  // The peer's messages (copies; null JSON until received).
  nlohmann::json remote_report() const;
  nlohmann::json remote_end() const;     // receiver: the sender's end message
  nlohmann::json remote_result() const;  // sender: the receiver's result
  nlohmann::json remote_final() const;   // client receiver: the server's final
  // This side's result/final message content (what it sent or would send).
  nlohmann::json LocalReceiverResult() const;
  nlohmann::json LocalSenderSummary() const;
  std::vector<std::string> corruption_details() const;

 private:
  // A copy of `field`, read under mu_ (the getters of the state the callbacks write).
  template <typename T>
  T Locked(const T& field) const {
    std::lock_guard<std::mutex> l(mu_);
    return field;
  }
  enum class State { kWaitRequest, kSending, kReceiving, kEndSent, kDone, kFailed };

  void OnEvent(Event& e);
  void OnData(Event& e);
  void OnControl(const nlohmann::json& j);
  void OnRequest(const nlohmann::json& j);
  void StartRole();
  void PumpLocked();
  void StopSendingLocked();
  bool SendControlLocked(const nlohmann::json& j, uint64_t tag);
  void FailLocked(const std::string& why, bool abort_connection);
  void Fail(const std::string& why, bool abort_connection);
  void SchedulerLoop();
  uint64_t OutstandingLimit() const;
  nlohmann::json ReceiverResultLocked() const;
  nlohmann::json SenderSummaryLocked() const;
  // Server sending in reverse mode: the final summary goes out once every data byte is
  // acknowledged (the result can overtake the ACK of the last message), or kFinalWait
  // after the result at the latest.
  void MaybeSendFinalLocked(int64_t now_ns);
  // The receiver's posted buffers (Options::regions): created and posted.
  void PostReceiveBuffersLocked();

  std::shared_ptr<ConnectionHandle> handle_;
  Options opt_;
  std::shared_ptr<const Pattern> pattern_;
  uint64_t pattern_region_ = 0;  // Options::regions: SendBuffer::region of the bulk sends
  std::unique_ptr<ReceiveBuffers> receive_buffers_;  // Options::regions, receiving
  bool with_header_ = false;

  mutable std::mutex mu_;
  State state_;
  uint64_t next_id_ = 0;      // id of the next message this side sends
  uint64_t outstanding_ = 0;  // data bytes submitted, not yet send-complete
  uint64_t submitted_ = 0;    // data bytes submitted
  uint64_t data_messages_ = 0;
  int64_t end_ns_ = 0;  // time-limited sender: when to stop
  int64_t next_report_ns_ = 0;
  std::string error_;
  nlohmann::json remote_report_, remote_end_, remote_result_, remote_final_;
  std::vector<double> mct_s_;
  std::vector<std::string> corruption_;
  bool result_sent_ = false;
  int64_t final_due_ns_ = 0;  // reverse-mode server: the result arrived, final pending
  double cpu_user0_ = 0, cpu_system0_ = 0;  // process CPU time when the test started
  std::thread scheduler_;
  std::atomic<bool> stop_scheduler_{false};

  std::atomic<bool> has_request_{false};
  std::atomic<bool> complete_{false};
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> start_ns_{0};
  std::atomic<uint64_t> bytes_acked_{0};
  std::atomic<int64_t> first_send_ns_{0};
  std::atomic<int64_t> last_ack_ns_{0};
  std::atomic<uint64_t> bytes_verified_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> messages_verified_{0};
  std::atomic<uint64_t> corrupt_messages_{0};
  std::atomic<int64_t> first_data_ns_{0};
  std::atomic<int64_t> last_data_ns_{0};
  std::atomic<uint64_t> late_submissions_{0};
};

}  // namespace longhaul::perf
