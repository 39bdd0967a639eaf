// A bridge session: the TCP connections carried as streams over one longhaul connection
// between a client bridge and a server bridge (docs/bridge.md).
//
// Streams. The client opens a stream for each TCP connection it accepts (OPEN carries
// the forward's name); the server connects to that forward's target. Each direction of
// a stream is a sequence of frames (tools/bridge/bridge_frames.h) sent as unordered
// longhaul messages, so a lost packet holds back only its own stream; the receiver puts
// each stream's frames back in order. FIN carries a half-close, RESET a reset (the TCP
// side is then closed with an RST), and a target that refuses or cannot be reached ends
// the stream with a RESET naming the reason.
//
// Flow control and memory. Each stream's receiver grants its sender a window (WINDOW:
// the highest payload offset it accepts), at most `stream_window` and shrinking to
// `memory` / open streams when many are open, so what a receiver buffers is bounded per
// stream and in total; a sender beyond its grant is a protocol violation that ends the
// session. A receiver grants more only as it writes to its TCP socket, so a slow TCP
// reader slows its own stream's sender and no other. On the sending side TCP is read
// only while the longhaul connection's unsent backlog is short (a few ms of its pacing
// rate) and the bytes submitted but not yet acknowledged stay under `send_memory`:
// streams with data take turns, one chunk each, so a bulk stream cannot queue a small
// request behind megabytes.
//
// Threading: every method runs on the io_context's thread (one thread). The longhaul
// handle's events are posted to it from the driver thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_frames.h"
#include "tools/bridge/bridge_metrics.h"
#include "transport/datapath/connection_handle.h"

namespace longhaul::bridge {

// The handshake application data a client bridge sends (the server refuses others).
inline constexpr const char* kBridgeAppData = "longhaul-bridge/1";
// What a client may send on a new stream before the server's first WINDOW.
inline constexpr uint64_t kInitialWindow = 256 * 1024;
// Most payload bytes per DATA frame (one read from TCP).
inline constexpr size_t kChunk = 64 * 1024;
// Most frames one stream may hold out of order (each costs an event and a buffer).
inline constexpr size_t kMaxReorderFrames = 65536;
// Server: a stream whose first frames arrived without their OPEN is dropped after this.
inline constexpr std::chrono::seconds kOpenTimeout{30};

struct SessionOptions {
  bool is_client = true;
  uint64_t stream_window = 32ull << 20;  // most a stream's receiver grants
  uint64_t memory = 512ull << 20;        // receive budget shared by the open streams
  uint64_t send_memory = 256ull << 20;   // submitted, not yet acknowledged, all streams
  size_t max_streams = 4096;
  // The longhaul connection's unsent backlog the bridge keeps: this long at the pacing
  // rate, at least min_backlog bytes. Shorter: less wait for a small frame behind bulk
  // data; longer: more slack for late wake-ups of the bridge's thread.
  std::chrono::microseconds send_backlog{2000};
  uint64_t min_backlog = 256 * 1024;
  std::chrono::milliseconds connect_timeout{10000};  // server: connecting to a target
  // Server: the target of a forward; nullptr when there is none of that name.
  std::function<const Forward*(const std::string& name)> find_forward;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::io_context& io, SessionOptions options, Metrics* metrics);
  ~Session();

  // Takes over the longhaul connection. Call on the io thread before `conn`'s callback
  // can deliver events: the caller posts Attach first and sets the callback after
  // (EventCallbackFor), so events reach the session after it.
  void Attach(std::shared_ptr<ConnectionHandle> conn);
  // The callback to give the connection handle: posts each event to the session.
  static EventCallback EventCallbackFor(boost::asio::io_context& io, std::weak_ptr<Session> s);

  // Client: carries an accepted TCP connection for `forward` as a new stream.
  void OpenStream(boost::asio::ip::tcp::socket socket, const std::string& forward);
  // No new streams (the server answers OPEN with a RESET "draining" and tells the
  // client with GOAWAY); the connection closes cleanly when the last stream ends.
  void Drain();
  // Ends every stream with a RESET and closes the connection now.
  void Abort(const std::string& reason);

  bool closed() const { return closed_; }
  bool draining() const { return draining_; }
  size_t open_streams() const { return streams_.size(); }
  const std::shared_ptr<ConnectionHandle>& connection() const { return conn_; }
  // Called once, on the io thread, when the longhaul connection has ended.
  std::function<void(const absl::Status&)> on_closed;
  // Client: called once when the server announces it is draining (GOAWAY): open no new
  // streams here; the streams already open go on.
  std::function<void()> on_goaway;

 private:
  struct Stream;
  using StreamPtr = std::shared_ptr<Stream>;

  void OnEvent(Event& e);
  void OnFrame(Event& e);
  void ProtocolError(const std::string& what);
  void OnClosed(const absl::Status& status);

  StreamPtr NewStream(uint64_t id, boost::asio::ip::tcp::socket socket);
  bool IsNewPeerStream(uint64_t id) const;
  void MarkPeerStreamSeen(uint64_t id);
  void Sequenced(const StreamPtr& s, uint64_t seq, Event& e, const Frame& f);
  void Deliver(const StreamPtr& s, Event& e, const Frame& f);
  void OnOpen(const StreamPtr& s, const Frame& f);
  void ConnectTarget(const StreamPtr& s, const Forward& fwd);
  void StartWrite(const StreamPtr& s);
  void MaybeGrant(const StreamPtr& s);
  void MaybeFinish(const StreamPtr& s);
  // Who ended a stream: this bridge (and it tells the peer), the peer (its RESET), or
  // this bridge without telling (the connection is gone).
  enum class ResetBy { kLocal, kPeer, kLocalSilent };
  void ResetStream(const StreamPtr& s, ResetCode code, const std::string& reason, ResetBy by);
  void WatchErrors(const StreamPtr& s);
  size_t StreamLimit() const;
  // Closes the connection once every submitted frame was acknowledged (so the last
  // DATA, FIN, RESET or GOAWAY is not cancelled by the close), or after `deadline`.
  void CloseWhenFlushed(std::chrono::milliseconds deadline);
  void MaybeCloseFlushed();
  void RemoveStream(const StreamPtr& s);

  // Sending.
  void Submit(std::shared_ptr<const void> owner, const uint8_t* data, size_t size);
  void SendControl(FrameType type, uint64_t stream, uint64_t value, const std::string& body = "");
  void ArmRead(const StreamPtr& s);
  void MakeReady(const StreamPtr& s);
  void Pump();
  bool ReadOne(const StreamPtr& s);
  uint64_t BacklogLimit();
  uint64_t WindowFor() const;

  boost::asio::io_context& io_;
  const SessionOptions o_;
  Metrics* metrics_;
  std::shared_ptr<ConnectionHandle> conn_;
  std::map<uint64_t, StreamPtr> streams_;
  uint64_t next_stream_id_ = 1;  // client
  // Server: peer stream ids seen (every id <= seen_floor_, and those in seen_above_).
  uint64_t seen_floor_ = 0;
  std::set<uint64_t> seen_above_;
  std::deque<StreamPtr> ready_;  // streams whose TCP socket is readable, in turn
  boost::asio::steady_timer pump_timer_;
  bool pump_timer_armed_ = false;
  uint64_t send_inflight_ = 0;  // bytes submitted, not yet send-complete
  uint64_t buffered_ = 0;       // received bytes not yet written to TCP, all streams
  bool draining_ = false;
  bool closed_ = false;
  bool goaway_received_ = false;
  bool close_when_flushed_ = false;
  boost::asio::steady_timer close_timer_;
};

}  // namespace longhaul::bridge
