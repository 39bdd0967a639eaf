// The bridge's stream protocol for one session, without I/O (docs/bridge.md sections 2,
// 4 and 5): which streams exist, sequencing and the reorder buffer, flow-control windows,
// FIN and RESET, what is remembered of ended and unknown stream ids, and what every
// buffered byte costs against the session's Budget (tools/bridge/bridge_budget.h).
// tools/bridge/bridge_session.h puts it between a longhaul connection and TCP sockets;
// the unit tests drive it with frames and a virtual clock.
//
// Inputs: the peer's messages (OnMessage), the local side's events (a stream opened by
// the client, bytes read from TCP, TCP EOF, a chunk written to TCP, a local reset), send
// completions, and OnTimeout. Outputs: frames to send (PollSend, in order), and events
// for the I/O side (PollEvent): connect a target, write to TCP, read TCP again, a stream
// ended, the session must end.
//
// Rules (each refusal is counted in Metrics::refused under the reason in brackets):
// - Memory. A stream is charged kStreamCharge while it exists, plus the payload its
//   receiver promised and has not yet written to TCP (window - written), plus
//   kFrameOverhead for every frame it holds (out of order or waiting for TCP). The
//   sender charges every frame it submitted until it is acknowledged: its bytes plus
//   kFrameOverhead. A stream whose OPEN cannot be charged is refused with RESET limit
//   [memory]; a frame whose overhead cannot be charged resets its stream [memory]; a
//   window the budget cannot back is not granted now but retried by OnTimeout
//   [window_deferred, not a refusal of the peer]; the I/O side reads no TCP data while
//   the budget is short. Control frames are charged even beyond the budget, but at most
//   kMaxControlInflight of them may wait for their acknowledgement: beyond, the peer is
//   not reading and the session ends [peer_not_reading].
// - Streams. At most max_streams at once (RESET limit [streams]); a server's stream
//   takes one of the budget's target connections (RESET limit [targets] when none is
//   left).
// - Sequencing. OPEN is sequence 0, DATA and FIN 1, 2, ... A repeated sequence number,
//   an empty DATA, a second FIN or data beyond the granted window end the session
//   (protocol error). A stream holds at most kMaxHeldFrames frames [frames: the stream
//   is reset]. DATA or FIN for a stream that was never opened ends the session
//   [not_opened]: a client bridge sends a stream's frames ordered until the server's
//   first WINDOW, so they never overtake their OPEN.
// - Ids. The server remembers the ids it has seen (open, ended, or reset before their
//   OPEN) as a floor plus at most kMaxRememberedIds ids above it; when more are
//   remembered the floor rises past the lowest [ids_forgotten]. A frame for a
//   remembered id that is not open is late and ignored; an OPEN for one is ignored
//   [stale_id].
//
// Thread-safety: none (one thread, the session's).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/bridge/bridge_budget.h"
#include "tools/bridge/bridge_frames.h"
#include "tools/bridge/bridge_metrics.h"
#include "transport/base/units.h"
#include "transport/core/connection.h"

namespace longhaul::bridge {

// What a client may send on a new stream before the server's first WINDOW.
inline constexpr uint64_t kInitialWindow = 256 * 1024;
// Most a receiver grants a stream before any of its data reached TCP: a stream that
// carries nothing in one direction (an upload's return path, an idle connection)
// holds no more of the budget than this; one whose data flows grows to the full
// window (WindowFor) with its first write, one round trip in.
inline constexpr uint64_t kOpenWindow = 1024 * 1024;
// Most payload bytes per DATA frame (one read from TCP).
inline constexpr size_t kChunk = 64 * 1024;
// Charged for every frame held or in flight, on top of its payload: the event,
// its map or queue node and the allocator's share.
inline constexpr uint64_t kFrameOverhead = 256;
// Charged for every stream while it exists: its state, socket and timers.
inline constexpr uint64_t kStreamCharge = 4096;
// Most frames one stream holds (out of order and waiting for TCP).
inline constexpr size_t kMaxHeldFrames = 16384;
// Most ids remembered above the floor (server).
inline constexpr size_t kMaxRememberedIds = 4096;
// Most control-frame bytes (with their overhead) waiting for acknowledgement.
inline constexpr uint64_t kMaxControlInflight = 1 << 20;
// How often windows held back for memory are retried.
inline constexpr Duration kGrantRetry = Duration::Milliseconds(20);

struct ProtocolOptions {
  bool is_client = true;
  uint64_t stream_window = 32ull << 20;  // most a stream's receiver grants
  uint64_t memory = 512ull << 20;        // windows shrink to memory / open streams
  size_t max_streams = 4096;
  // Server: whether a forward of this name exists.
  std::function<bool(const std::string& name)> has_forward;
};

// A frame to send: one longhaul message.
struct OutFrame {
  std::string bytes;
  bool ordered = false;  // send without SendBuffer::unordered
};

// A contiguous piece of received payload for the TCP side (or the FIN after the
// data).
struct Chunk {
  Event event;  // owns the bytes
  const uint8_t* data = nullptr;
  size_t size = 0;
  bool fin = false;
};

struct StreamEvent {
  enum class Kind {
    kConnectTarget,  // server: an OPEN was accepted; connect `forward`'s target
    kWritable,       // stream has a chunk for TCP (NextChunk)
    kSendRoom,       // the peer granted more: read TCP again
    kEnded,          // stream removed: `reset` says whether to close with an RST
    kSessionError,   // end the session (a protocol error): `detail`
    kGoAway,         // client: the server is draining
  };
  Kind kind = Kind::kWritable;
  uint64_t stream = 0;
  std::string forward;
  bool reset = false;
  ResetCode code = ResetCode::kAborted;
  std::string by;  // kEnded by a reset: "local" or "peer"
  std::string detail;
};

// What a frame read from TCP becomes.
struct SendSlot {
  uint64_t seq = 0;
  bool ordered = false;
};

class StreamProtocol {
 public:
  // `budget` is shared with the other sessions of the same client key and kept alive by
  // this object; `metrics` must outlive it.
  StreamProtocol(ProtocolOptions options, std::shared_ptr<Budget> budget, Metrics* metrics);
  ~StreamProtocol();  // gives back every charge
  StreamProtocol(const StreamProtocol&) = delete;
  StreamProtocol& operator=(const StreamProtocol&) = delete;

  // ---- the peer
  void OnMessage(Time now, Event event);
  // A sent message was acknowledged (or cancelled, or never sent): its tag (kDataTag,
  // kControlTag) and size.
  void OnSendComplete(uint64_t tag, uint64_t size);

  // ---- the local side
  // Client: a new stream for `forward` (OPEN queued); its id, or 0 (refused and counted)
  // when the stream limit or the budget says no. The caller checks draining.
  uint64_t OpenLocal(Time now, const std::string& forward);
  // Payload bytes the peer accepts on `stream` now (0 for unknown streams and
  // after FIN). The I/O side also checks the budget
  // (budget().memory_available()) before it reads.
  uint64_t SendRoom(uint64_t stream) const;
  // A DATA frame of `payload` bytes was read from TCP: its sequence number and
  // ordering; the frame (header + payload) is charged until OnSendComplete.
  // Send it with kDataTag.
  SendSlot OnDataRead(uint64_t stream, uint64_t payload);
  // The tags to send frames with, so OnSendComplete knows data from control.
  static constexpr uint64_t kDataTag = 1, kControlTag = 2;
  // TCP EOF: queues FIN.
  void OnLocalEof(uint64_t stream);
  // The stream's TCP side is connected (server: the target answered).
  void OnConnected(uint64_t stream);
  // The next chunk for TCP, or nullptr.
  Chunk* NextChunk(uint64_t stream);
  // The front chunk was written (a FIN: the write side was shut down). Returns
  // the chunk's receive buffer for reuse.
  OwnedBuffer OnChunkWritten(Time now, uint64_t stream);
  // Ends a stream from this side: RESET to the peer (unless `silent`), kEnded.
  void ResetLocal(uint64_t stream, ResetCode code, const std::string& reason, bool silent = false);
  // No new streams (server: GOAWAY, OPENs answered with RESET draining).
  void Drain();
  // The connection ended: streams that finished both ways keep their queued
  // chunks; the rest end (session_lost).
  void OnConnectionClosed(const absl::Status& status);

  // ---- time
  void OnTimeout(Time now);
  Time NextTimeout() const;

  // ---- outputs
  bool PollSend(OutFrame* frame);
  bool PollEvent(StreamEvent* event);

  // ---- state
  size_t open_streams() const { return streams_.size(); }
  bool has_stream(uint64_t stream) const { return streams_.count(stream) != 0; }
  bool draining() const { return draining_; }
  bool failed() const { return failed_; }
  // Bytes this session has charged to its budget now.
  uint64_t charged() const { return charged_; }
  const Budget& budget() const { return *budget_; }
  struct StreamDebug {
    uint64_t granted = 0, written = 0, received = 0, held_frames = 0, peer_limit = 0, sent = 0,
             charged = 0;
    bool opened = false, fin_received = false, fin_sent = false;
  };
  StreamDebug debug(uint64_t stream) const;
  size_t remembered_ids() const { return seen_above_.size(); }
  uint64_t id_floor() const { return seen_floor_; }

 private:
  struct Held {
    Event event;
    FrameType type = FrameType::kData;
    uint64_t payload = 0;
  };
  struct Stream {
    uint64_t id = 0;
    std::string forward;
    bool opened = false;
    bool connected = false;
    bool admitted = false;  // server: holds a target connection of the budget
    uint64_t charged = 0;   // this stream's share of charged_
    // sending (TCP -> peer)
    uint64_t send_seq = 1, sent = 0, peer_limit = 0;
    bool fin_sent = false;
    bool peer_window_seen = false;  // client: the server's first WINDOW came
    // receiving (peer -> TCP)
    uint64_t next_seq = 0;
    std::map<uint64_t, Held> reorder;
    std::deque<Chunk> writeq;
    uint64_t received = 0, reorder_bytes = 0, written = 0, granted = 0;
    bool fin_received = false, fin_written = false;
    bool starved = false;  // a grant waits for memory
    bool flowing = false;  // some of its data was written to TCP (full windows from then)
    size_t held() const { return reorder.size() + writeq.size(); }
  };

  void OnFrame(Time now, Event& e, const Frame& f);
  void OnPeerOpen(Time now, Event& e, const Frame& f);
  void Sequenced(Stream& s, uint64_t seq, Event& e, const Frame& f);
  void Deliver(Stream& s, Event& e, const Frame& f);
  void MaybeGrant(Stream& s, bool always);
  void MaybeFinish(Stream& s);
  void EndStream(Stream& s, bool reset, ResetCode code, const std::string& by,
                 const std::string& detail);
  void SessionError(const std::string& refusal, const std::string& detail, bool protocol);
  void Refuse(const std::string& reason) { ++metrics_->refused[reason]; }
  void SendControl(FrameType type, uint64_t stream, uint64_t value, const std::string& body = "",
                   bool ordered = false);
  // Server: answers an OPEN it does not take with RESET (counted; kEnded for
  // the log).
  void RefuseOpen(uint64_t id, ResetCode code, const std::string& reason,
                  const std::string& refusal);
  void Emit(StreamEvent::Kind kind, uint64_t stream);
  void ForceChargeUnattributed(uint64_t bytes);
  bool Charge(Stream* s, uint64_t bytes);
  void Release(Stream* s, uint64_t bytes);
  uint64_t WindowFor() const;
  size_t StreamLimit() const;
  bool Remembered(uint64_t id) const;
  void Remember(uint64_t id);

  const ProtocolOptions o_;
  std::shared_ptr<Budget> budget_;
  Metrics* metrics_;
  std::map<uint64_t, Stream> streams_;
  uint64_t next_stream_id_ = 1;  // client
  uint64_t seen_floor_ = 0;      // server: every id <= floor was seen
  std::set<uint64_t> seen_above_;
  std::deque<OutFrame> out_;
  std::deque<StreamEvent> events_;
  uint64_t charged_ = 0;           // all of this session's charges
  uint64_t data_inflight_ = 0;     // DATA sent, not acknowledged (with overhead)
  uint64_t control_inflight_ = 0;  // control frames sent, not acknowledged (with overhead)
  Time next_retry_ = Time::Infinite();
  Time now_ = Time::Zero();  // the latest time an entry point was given
  bool draining_ = false;
  bool failed_ = false;
  bool closed_ = false;
};

}  // namespace longhaul::bridge
