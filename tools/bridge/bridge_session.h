// A bridge session: the TCP connections carried as streams over one longhaul
// connection between a client bridge and a server bridge (docs/bridge.md).
//
// The stream protocol itself (sequencing, windows, FIN/RESET, what is charged
// to the memory budget, what is refused) is StreamProtocol
// (tools/bridge/stream_protocol.h), which has no I/O; a Session feeds it the
// longhaul connection's events and the TCP sockets' progress and carries out
// what it asks: send frames, connect targets, write chunks to TCP, read TCP
// again, end streams or the session.
//
// Sending. TCP is read only while the longhaul connection's unsent backlog is
// short (a few ms of its pacing rate: 2 ms while small messages flow, 20 ms for
// bulk alone; tools/bridge/send_backlog.h), the bytes submitted but not yet
// acknowledged stay under `send_memory`, and the budget has room: streams with
// data take turns, one chunk each, so a bulk stream cannot queue a small
// request behind megabytes.
//
// Threading: every method runs on the io_context's thread (one thread). The
// longhaul handle's events are posted to it from the engine (driver) thread that runs
// the connection; with several engines, several such threads post at once, and
// asio::post is all they share with the session.
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
#include "tools/bridge/send_backlog.h"
#include "tools/bridge/stream_protocol.h"
#include "transport/datapath/connection_handle.h"

namespace longhaul::bridge {

// The handshake application data a client bridge sends (the server refuses
// others).
inline constexpr const char* kBridgeAppData = "longhaul-bridge/1";

struct SessionOptions {
  bool is_client = true;
  uint64_t stream_window = 32ull << 20;  // most a stream's receiver grants
  uint64_t memory = 512ull << 20;        // receive budget shared by the open streams
  uint64_t send_memory = 256ull << 20;   // submitted, not yet acknowledged, all streams
  size_t max_streams = 4096;
  // The longhaul connection's unsent backlog the bridge keeps
  // (tools/bridge/send_backlog.h).
  SendBacklogOptions send_backlog;
  std::chrono::milliseconds connect_timeout{10000};  // server: connecting to a target
  // Server: the target of a forward; nullptr when there is none of that name.
  std::function<const Forward*(const std::string& name)> find_forward;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `budget`: what the session's buffers are charged to (server: its client
  // key's).
  Session(boost::asio::io_context& io, SessionOptions options, std::shared_ptr<Budget> budget,
          Metrics* metrics);
  ~Session();

  // Takes over the longhaul connection. Call on the io thread before `conn`'s
  // callback can deliver events: the caller posts Attach first and sets the
  // callback after (EventCallbackFor), so events reach the session after it.
  void Attach(std::shared_ptr<ConnectionHandle> conn);
  // The callback to give the connection handle: posts each event to the
  // session.
  static EventCallback EventCallbackFor(boost::asio::io_context& io, std::weak_ptr<Session> s);
  // Gives the attached connection EventCallbackFor(io, s). A connection that already
  // ended (a peer that closed it at once: a server refusing the session) may have no
  // events left to deliver once its engine let go of it, so its end is posted here.
  static void StartEvents(boost::asio::io_context& io, const std::shared_ptr<Session>& s);

  // Client: carries an accepted TCP connection for `forward` as a new stream.
  void OpenStream(boost::asio::ip::tcp::socket socket, const std::string& forward);
  // No new streams (the server answers OPEN with a RESET "draining" and tells
  // the client with GOAWAY); the connection closes cleanly when the last stream
  // ends.
  void Drain();
  // Ends every stream with a RESET and closes the connection now.
  void Abort(const std::string& reason);

  bool closed() const { return closed_; }
  bool draining() const { return core_.draining(); }
  size_t open_streams() const { return core_.open_streams(); }
  const StreamProtocol& core() const { return core_; }
  const std::shared_ptr<ConnectionHandle>& connection() const { return conn_; }
  // Called once, on the io thread, when the longhaul connection has ended.
  std::function<void(const absl::Status&)> on_closed;
  // Client: called once when the server announces it is draining (GOAWAY): open
  // no new streams here; the streams already open go on.
  std::function<void()> on_goaway;

 private:
  struct Stream;
  using StreamPtr = std::shared_ptr<Stream>;

  void OnEvent(Event& e);
  void OnClosed(const absl::Status& status);
  // Carries out what the protocol asks for (frames to send, stream events).
  void Flush();
  void OnStreamEvent(StreamEvent& ev);
  void ArmTimer();
  static Time Now();

  StreamPtr NewStream(uint64_t id, boost::asio::ip::tcp::socket socket);
  StreamPtr Find(uint64_t id) const;
  void ConnectTarget(const StreamPtr& s, const Forward& fwd);
  void StartWrite(const StreamPtr& s);
  // Ends a stream from this side (a RESET to the peer) after a TCP error.
  void ResetStream(const StreamPtr& s, ResetCode code, const std::string& reason);
  void CloseSocket(const StreamPtr& s, bool reset);
  void WatchErrors(const StreamPtr& s);
  // Closes the connection once every submitted frame was acknowledged (so the
  // last DATA, FIN, RESET or GOAWAY is not cancelled by the close), or after
  // `deadline`.
  void CloseWhenFlushed(std::chrono::milliseconds deadline);
  void MaybeCloseFlushed();

  // Sending.
  void Submit(std::shared_ptr<const void> owner, const uint8_t* data, size_t size, uint64_t tag,
              bool ordered);
  void ArmRead(const StreamPtr& s);
  void MakeReady(const StreamPtr& s);
  void Pump();
  bool ReadOne(const StreamPtr& s);
  uint64_t BacklogLimit();

  boost::asio::io_context& io_;
  const SessionOptions o_;
  Metrics* metrics_;
  StreamProtocol core_;
  std::shared_ptr<ConnectionHandle> conn_;
  std::map<uint64_t, StreamPtr> streams_;  // the TCP side of the protocol's streams
  std::deque<StreamPtr> ready_;            // streams whose TCP socket is readable, in turn
  boost::asio::steady_timer pump_timer_;
  bool pump_timer_armed_ = false;
  boost::asio::steady_timer core_timer_;
  Time core_timer_at_ = Time::Infinite();
  uint64_t send_inflight_ = 0;  // bytes submitted, not yet send-complete
  SendBacklog backlog_;
  bool flushing_ = false;
  bool closed_ = false;
  bool close_when_flushed_ = false;
  bool session_error_ = false;
  boost::asio::steady_timer close_timer_;
};

}  // namespace longhaul::bridge
