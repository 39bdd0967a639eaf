#include "tools/nccl_bench/recommend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "transport/base/parse.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"
#include "transport/sim/link_files.h"
#include "transport/sim/link_spec.h"

namespace longhaul::nccl::bench {

int Recommend(const std::string& link, const std::string& profile) {
  Bandwidth rate;
  Duration rtt;
  std::string source;
  if (!profile.empty()) {
    absl::StatusOr<TransportConfig> c = LoadProfile(profile, TransportConfig{});
    if (!c.ok()) {
      fprintf(stderr, "longhaul-nccl-bench: %s\n", std::string(c.status().message()).c_str());
      return 2;
    }
    rate = c->rate;
    rtt = c->initial_rtt;
    source = absl::StrCat("profile ", profile);
  } else if (!link.empty()) {
    absl::StatusOr<sim::LinkSpec> s = sim::LoadLinkSpec(link);
    if (!s.ok()) {
      fprintf(stderr, "longhaul-nccl-bench: --link: %s\n",
              std::string(s.status().message()).c_str());
      return 2;
    }
    rate = s->rate;
    rtt = s->rtt;
    source = absl::StrCat("link ", s->ToString());
  } else {
    fprintf(stderr, "longhaul-nccl-bench: --recommend needs --link=SPEC or --profile=FILE\n");
    return 2;
  }
  if (rate.IsZero()) {
    fprintf(stderr, "longhaul-nccl-bench: the profile sets no rate (rate=0): give --link\n");
    return 2;
  }
  const double bdp = rate.BytesPerSecond() * rtt.seconds();
  // One engine per 25 Gbit/s: a core carries 32-40 Gbit/s a side protected and flat out
  // (docs/benchmarks.md section 15), less with headroom for an uneven split; at most 8.
  const int engines = std::clamp(static_cast<int>(std::ceil(rate.bps() / 25e9)), 1, 8);
  // One channel per 10 Gbit/s (a proxy thread copies at a few GB/s), at least 2, and a
  // multiple of the engines (each peer gets one connection per engine, comms in turn).
  int channels = std::clamp(static_cast<int>(std::ceil(rate.bps() / 10e9)), 2, 16);
  channels = (channels + engines - 1) / engines * engines;
  // The channels of a peer share its connections: together they need about 2 x BDP of
  // credit (a round trip of data plus a repair round), each comm its share.
  const uint64_t credit = std::clamp<uint64_t>(static_cast<uint64_t>(2 * bdp / channels),
                                               uint64_t{16} << 20, uint64_t{1} << 30);
  // Messages of at least 500 us at a channel's share of the rate (<= 2000 per second per
  // channel), a power of two in [512 KiB, 8 MiB]; NCCL_BUFFSIZE holds 8 of them.
  const double per_channel = rate.BytesPerSecond() / channels;
  uint64_t chunk = uint64_t{512} << 10;
  while (chunk < per_channel * 500e-6 && chunk < (uint64_t{8} << 20)) chunk *= 2;
  auto line = [](const std::string& cmd, const std::string& why) {
    printf("%-58s # %s\n", cmd.c_str(), why.c_str());
  };
  printf("# NCCL over longhaul, %s: rate %s, RTT %s, BDP %.2f MB\n", source.c_str(),
         FormatBandwidth(rate).c_str(), FormatDuration(rtt).c_str(), bdp / 1e6);
  line("export NCCL_NET_PLUGIN=longhaul", "libnccl-net-longhaul.so on LD_LIBRARY_PATH");
  line("export NCCL_NET=longhaul", "fail instead of falling back to IB/Socket");
  if (!profile.empty()) {
    line(absl::StrCat("export NCCL_LONGHAUL_PROFILE=", profile), "the tuned transport");
  }
  line("export NCCL_LONGHAUL_KEY=rank.key NCCL_LONGHAUL_PEER_KEY=ranks.pub",
       "packet protection (longhaul-keygen; or _PSK_FILE)");
  line(absl::StrCat("export NCCL_LONGHAUL_CREDIT=", FormatByteCount(credit)),
       "per comm; x channels >= 2 x BDP in flight per peer");
  line("export NCCL_PROTO=Simple", "LL/LL128 save microseconds, not milliseconds");
  line("export NCCL_ALGO=Ring", "bandwidth-optimal; trees add long-haul hops");
  line(absl::StrCat("export NCCL_LONGHAUL_ENGINES=", engines),
       "driver threads: one per 25 Gbit/s (a core's share)");
  line(absl::StrCat("export NCCL_MIN_NCHANNELS=", channels, " NCCL_MAX_NCHANNELS=", channels),
       engines > 1 ? absl::StrCat("one per 10 Gbit/s, a multiple of the ", engines, " engines")
                   : std::string("one per 10 Gbit/s"));
  line(absl::StrCat("export NCCL_BUFFSIZE=", 8 * chunk),
       absl::StrCat("8 steps of ", FormatByteCount(chunk), " messages"));
  line(absl::StrCat("export NCCL_P2P_NET_CHUNKSIZE=", chunk),
       "send/recv operations in the same message size");
  printf("# receiver memory bound: credit x channels = %s per peer and direction\n",
         FormatByteCount(credit * channels).c_str());
  return 0;
}

}  // namespace longhaul::nccl::bench
