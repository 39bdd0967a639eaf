// The longhaul-perf server: serves tests one after another and side by side until it is
// told to stop. Each accepted connection becomes a PerfStream whose logic runs on the
// driver thread; this thread ticks the streams (reports, limits), groups finished
// streams by test and prints a summary per test. A client that sends garbage, asks for a
// bad test or vanishes only ends its own connection.
//
// Engines (--engines=N): the accept callback, the Hello policy, the foreign-datagram
// handler and the connections' events run on N engine threads at once. What they share
// is safe with the locks that were there, plus one: `Accepted` (its mutex), the output
// (g_out_mu), the options (read only), the pattern cache (PatternFor's mutex), and the
// probe responder (SharedResponder's mutex, the one lock added: the steering sends every
// foreign datagram to engine 0, so it is never contended). A PerfStream is one
// connection's, so its events come from one engine; its mutex serves, as before, against
// this thread's Tick and reads.

#include <csignal>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "tools/common/json_fields.h"
#include "tools/common/security_flags.h"
#include "tools/perf/perf_engines.h"
#include "tools/perf/perf_format.h"
#include "tools/perf/perf_stream.h"
#include "tools/perf/perf_tool.h"
#include "transport/api/endpoint.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/profile/profile.h"
#include "tuner/probe/responder.h"

namespace longhaul::perf {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

std::mutex g_out_mu;
void Print(const std::string& s) {
  std::lock_guard<std::mutex> l(g_out_mu);
  std::cout << s << std::endl;
}

// The key-exchange refusals an endpoint counted (EndpointStats), as last reported.
struct RefusalCounts {
  uint64_t auth_failures = 0, keys_refused = 0, mismatches = 0;
};

void ReportRefusals(const EndpointStats& st, bool json, RefusalCounts* last) {
  const RefusalCounts now{st.handshake_auth_failures, st.keys_refused, st.security_mismatches};
  if (now.auth_failures == last->auth_failures && now.keys_refused == last->keys_refused &&
      now.mismatches == last->mismatches) {
    return;
  }
  if (json) {
    nlohmann::json j;
    j["event"] = "refused";
    j["handshake_auth_failures"] = now.auth_failures;
    j["keys_refused"] = now.keys_refused;
    j["security_mismatches"] = now.mismatches;
    Print(j.dump());
  } else {
    Print(absl::StrFormat(
        "refused clients so far: %d whose handshake did not authenticate (another server key "
        "or pre-shared key), %d with a key this server does not allow, %d with another "
        "protection mode (the warnings above name the clients, at most one a reason per 10 s)",
        now.auth_failures, now.keys_refused, now.mismatches));
  }
  *last = now;
}

struct Test {
  std::string id;
  std::string peer;
  TestRequest request;
  std::vector<std::shared_ptr<PerfStream>> streams;
  int64_t first_seen_ns = 0;
};

// What the accepted connections hand to the server loop (filled on the driver thread).
struct Accepted {
  std::mutex mu;
  std::deque<std::shared_ptr<PerfStream>> fresh;
  std::shared_ptr<PatternRegions> regions;  // zero copy (reverse tests), or null
};

// The accepted connection's stream: it prints the test request when it arrives.
PerfStream::Options AcceptedStreamOptions(const ServerOptions& o, const ConnectionHandle& h,
                                          std::shared_ptr<PatternRegions> regions) {
  PerfStream::Options so;
  so.is_client = false;
  so.regions = std::move(regions);
  so.max_duration_s = o.max_duration_s;
  const std::string peer = h.info().peer_address;
  nlohmann::json security = ConnectionSecurityToJson(h.info(), o.keys);
  std::string security_text = ConnectionSecurityText(h.info(), o.keys);
  so.on_request = [peer, security, security_text, json = o.json](PerfStream* s) {
    const TestRequest& r = s->request();
    if (json) {
      nlohmann::json j;
      j["event"] = "accepted";
      j["peer"] = peer;
      LONGHAUL_JSON_SET_FIELDS(j, r, test_id, stream, streams, reverse, workload, verify);
      j["security"] = security;
      Print(j.dump());
      return;
    }
    Print(absl::StrFormat(
        "Accepted connection from %s (test %s, stream %d of %d, %s, %s, %s of %s%s); %s", peer,
        r.test_id, r.stream + 1, r.streams, r.reverse ? "reverse" : "forward", r.workload,
        r.bytes > 0 ? FormatByteCount(r.bytes) : absl::StrFormat("%g s", r.time_s),
        FormatByteCount(r.message_size), r.verify ? "" : ", not verified", security_text));
  };
  return so;
}

// The tuner's probe responder, one for the port (it keeps per-train state), and when it
// last expired old trains. Locked: the handler is called from the engines' threads.
struct SharedResponder {
  std::mutex mu;
  tuner::probe::ProbeResponder responder;
  int64_t last_expire_ns = 0;
};

ListenOptions MakeListenOptions(const ServerOptions& o, Accepted* accepted) {
  ListenOptions lo;
  lo.config = o.config;
  // The client's transport settings apply to its connections (they decide how the server
  // sends in reverse tests), within the server's limits: its receive window at most.
  lo.policy = [&o](const HelloInfo& h) -> absl::StatusOr<TransportConfig> {
    LH_ASSIGN_OR_RETURN(TransportConfig c, ParseProfile(h.app_data, o.config, "client settings"));
    c.recv_window = std::min(c.recv_window, o.config.recv_window);
    c.idle_timeout = std::min(c.idle_timeout, o.config.idle_timeout);
    LH_RETURN_IF_ERROR(c.Validate());
    return c;
  };
  lo.on_accept = [&o, accepted](std::shared_ptr<ConnectionHandle> h) {
    auto s = std::make_shared<PerfStream>(h, AcceptedStreamOptions(o, *h, accepted->regions));
    s->Attach();
    std::lock_guard<std::mutex> l(accepted->mu);
    accepted->fresh.push_back(std::move(s));
  };
  // The tuner's probes share the port: their first byte (0xB7) is not longhaul's version.
  // Every engine gets a copy of the handler; they share the responder.
  if (o.answer_probes) {
    auto shared = std::make_shared<SharedResponder>();
    lo.on_foreign_datagram = [shared](const ForeignDatagram& f,
                                      std::vector<std::vector<uint8_t>>* replies) {
      if (!tuner::probe::IsProbeDatagram(f.data)) return;
      std::lock_guard<std::mutex> l(shared->mu);
      shared->responder.Handle(f.from, f.data,
                               f.kernel_time_ns != 0 ? f.kernel_time_ns : f.now_ns, replies,
                               f.now_ns);
      if (f.now_ns - shared->last_expire_ns > 1'000'000'000) {
        shared->responder.Expire(f.now_ns);
        shared->last_expire_ns = f.now_ns;
      }
    };
  }
  return lo;
}

void PrintListening(const ServerOptions& o, uint16_t port, uint32_t engines) {
  if (o.json) {
    nlohmann::json j;
    j["event"] = "listening";
    j["port"] = port;
    j["bind"] = o.bind;
    j["engines"] = engines;
    j["version"] = PerfVersion();
    j["security"] = SecuritySettingsToJson(o.keys);
    Print(j.dump());
  } else {
    Print("-----------------------------------------------------------");
    Print(absl::StrCat("Server listening on ", port, " (longhaul, ", o.bind,
                       engines > 1 ? absl::StrCat(", ", engines, " engines") : "", ")"));
    Print(SecuritySettingsLine(o.keys));
    Print("-----------------------------------------------------------");
  }
}

// Ticks the live streams; an ended one joins its test (or, without a test request, is
// reported and dropped).
void TickAndCollect(const ServerOptions& o, std::vector<std::shared_ptr<PerfStream>>* live,
                    std::map<std::string, Test>* tests) {
  std::vector<std::shared_ptr<PerfStream>> still;
  for (std::shared_ptr<PerfStream>& s : *live) {
    s->Tick();
    if (!s->closed()) {
      still.push_back(s);
      continue;
    }
    s->Shutdown();
    const std::string peer = s->handle().info().peer_address;
    if (!s->has_request()) {
      if (!s->error().empty()) {
        if (o.json) {
          nlohmann::json j;
          j["event"] = "rejected";
          j["peer"] = peer;
          j["error"] = s->error();
          Print(j.dump());
        } else {
          Print(absl::StrCat("connection from ", peer, " ended without a test: ", s->error()));
        }
      }
      continue;
    }
    Test& t = (*tests)[s->request().test_id];
    t.id = s->request().test_id;
    t.peer = peer;
    t.request = s->request();
    t.streams.push_back(s);
  }
  live->swap(still);
}

// The tests all of whose streams have ended (none of their streams is still live).
std::vector<std::string> FinishedTests(const std::map<std::string, Test>& tests,
                                       const std::vector<std::shared_ptr<PerfStream>>& live) {
  std::vector<std::string> done;
  for (const auto& [id, t] : tests) {
    bool any_live = false;
    for (const auto& s : live) {
      if (s->has_request() && s->request().test_id == id) any_live = true;
    }
    if (!any_live) done.push_back(id);
  }
  return done;
}

// Prints a finished test's summary (lines per stream, or one JSON event) with the
// engines' reports (`per_engine`: the endpoint's, counted since the server started);
// returns whether it was intact (no stream error, nothing corrupt).
bool ReportTest(const Test& t, bool json, const std::vector<EndpointStats>& per_engine) {
  const std::string& id = t.id;
  bool intact = true;
  uint64_t bytes = 0, corrupt = 0;
  double secs = 0;
  nlohmann::json errs = nlohmann::json::array();
  std::vector<uint32_t> on;
  for (size_t i = 0; i < t.streams.size(); ++i) {
    PerfStream& s = *t.streams[i];
    on.push_back(s.handle().info().engine);
    const bool recv = !s.sender();
    const uint64_t b = recv ? s.bytes_delivered() : s.bytes_acked();
    const int64_t a = recv ? s.first_data_ns() : s.first_send_ns();
    const int64_t z = recv ? s.last_data_ns() : s.last_ack_ns();
    const double sec = a > 0 && z > a ? (z - a) * 1e-9 : 0;
    bytes += b;
    secs = std::max(secs, sec);
    corrupt += s.corrupt_messages();
    if (!s.error().empty()) {
      intact = false;
      errs.push_back(absl::StrCat("stream ", s.request().stream + 1, ": ", s.error()));
    }
    if (s.corrupt_messages() > 0) intact = false;
    if (!json) {
      Print(absl::StrFormat("[%3d]   0.00-%-6.2f sec  %s  %s  %s", s.request().stream + 1, sec,
                            FormatTransfer(b), FormatBitrate(sec > 0 ? b * 8.0 / sec : 0),
                            recv ? "receiver" : "sender"));
      for (const std::string& c : s.corruption_details()) Print(absl::StrCat("  corrupt: ", c));
    }
  }
  const std::vector<EngineReport> engines = EngineReports(per_engine, on);
  if (!json) {
    if (t.streams.size() > 1) {
      Print(absl::StrFormat("[SUM]   0.00-%-6.2f sec  %s  %s", secs, FormatTransfer(bytes),
                            FormatBitrate(secs > 0 ? bytes * 8.0 / secs : 0)));
    }
    for (const std::string& l : EngineLines(engines)) Print(l);
    for (const auto& e : errs) Print(absl::StrCat("test ", id, " ", e.get<std::string>()));
    if (t.request.verify) {
      Print(absl::StrCat("test ", id, " from ", t.peer, ": ",
                         intact ? "done, payload intact" : "FAILED", " (", corrupt,
                         " corrupt message(s))"));
    } else {
      Print(absl::StrCat("test ", id, " from ", t.peer, ": ", intact ? "done" : "FAILED",
                         ", payload not verified (--verify=off)"));
    }
    Print("-----------------------------------------------------------");
  } else {
    nlohmann::json j;
    j["event"] = "test";
    j["test_id"] = id;
    j["peer"] = t.peer;
    j["reverse"] = t.request.reverse;
    j["streams"] = t.streams.size();
    j["bytes"] = bytes;
    j["seconds"] = secs;
    j["bits_per_second"] = secs > 0 ? bytes * 8.0 / secs : 0.0;
    j["corrupt_messages"] = corrupt;
    j["verified"] = t.request.verify;
    j["intact"] = intact;
    j["errors"] = errs;
    j["engines"] = EnginesJson(engines);
    Print(j.dump());
  }
  return intact;
}

}  // namespace

int RunServer(const ServerOptions& o) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(o.endpoint);
  if (!ep.ok()) {
    std::cerr << "longhaul-perf: error - " << ep.status().message() << std::endl;
    return 1;
  }
  Accepted accepted;
  accepted.regions = ZeroCopyRegions(**ep, o.endpoint, o.zero_copy);
  absl::StatusOr<uint16_t> port = (*ep)->Listen(o.bind, o.port, MakeListenOptions(o, &accepted));
  if (!port.ok()) {
    std::cerr << "longhaul-perf: error - cannot listen on " << o.bind << ":" << o.port << ": "
              << port.status().message() << std::endl;
    return 1;
  }
  PrintListening(o, *port, (*ep)->stats().engines);

  std::vector<std::shared_ptr<PerfStream>> live;
  std::map<std::string, Test> tests;
  int one_off_status = -1;
  // Clients refused by the key exchange leave no connection: the endpoint logs each one
  // (glog, stderr) and counts it; the counts are reported here about once a second.
  RefusalCounts refused;
  int64_t next_refusal_check = 0;
  while (!g_stop.load() && one_off_status < 0) {
    if (const int64_t now = MonotonicNs(); now >= next_refusal_check) {
      next_refusal_check = now + 1'000'000'000;
      ReportRefusals((*ep)->stats(), o.json, &refused);
    }
    {
      std::lock_guard<std::mutex> l(accepted.mu);
      while (!accepted.fresh.empty()) {
        live.push_back(std::move(accepted.fresh.front()));
        accepted.fresh.pop_front();
      }
    }
    TickAndCollect(o, &live, &tests);
    for (const std::string& id : FinishedTests(tests, live)) {
      const bool intact = ReportTest(tests[id], o.json, (*ep)->engine_stats());
      if (const std::string uc = UcLine(o.endpoint, (*ep)->stats()); !o.json && !uc.empty()) {
        Print(uc);
      }
      tests.erase(id);
      if (o.one_off) one_off_status = intact ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& s : live) s->Shutdown();
  {
    std::lock_guard<std::mutex> l(accepted.mu);
    for (auto& s : accepted.fresh) s->Shutdown();
  }
  (*ep)->Close();
  return one_off_status < 0 ? 0 : one_off_status;
}

}  // namespace longhaul::perf
