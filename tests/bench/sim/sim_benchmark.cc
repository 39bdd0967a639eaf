// Cost of the simulator's own machinery per packet, without the Connection core:
//   BM_LinkOffer          one LinkDirection::Offer (lossy link, the per-packet model cost)
//   BM_SimulatorEvents    fake endpoints exchanging datagrams whose bytes nobody touches:
//                         event loop + link model + buffer pool + FIFO per packet
//   BM_SimulatorBytes     the same, but the sender writes a payload and a CRC32C and the
//                         receiver checks the CRC: the memory traffic a real Connection adds
// Run: build/bench/sim_benchmark  (items_per_second = datagrams per wall second)
#include <cstring>

#include "benchmark/benchmark.h"
#include "transport/sim/link_model.h"
#include "transport/sim/simulator.h"
#include "transport/wire/crc32c.h"

namespace longhaul::sim {
namespace {

LinkSpec Spec(const char* text) { return *ParseLinkSpec(text, {}); }

void BM_LinkOffer(benchmark::State& state) {
  LinkDirection link(Spec("rate=100gbit,rtt=58ms,loss=1e-4,queue=10GB"), 1);
  int64_t t = 0;
  for (auto _ : state) {
    Verdict v = link.Offer(Time::FromNanoseconds(t), 8960, true);
    benchmark::DoNotOptimize(v);
    t += 700;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LinkOffer);

// Paced sender: one datagram every `gap`, like a Connection's pacer at the link rate.
class Sender : public SimNode {
 public:
  Sender(uint64_t count, size_t size, Duration gap, bool touch)
      : count_(count), size_(size), gap_(gap), touch_(touch) {}
  void OnDatagram(Time, std::span<const uint8_t> d, Ecn) override { ++acks_; }
  void OnTimeout(Time) override {}
  size_t PollTransmit(Time now, uint8_t* buf, size_t, TransmitInfo*) override {
    if (sent_ == count_ || now < next_) return 0;
    if (touch_) {
      std::memset(buf, static_cast<int>(sent_), size_ - 4);
      uint32_t crc = wire::Crc32c(buf, size_ - 4);
      std::memcpy(buf + size_ - 4, &crc, 4);
    } else {
      std::memcpy(buf, &sent_, 8);
    }
    ++sent_;
    next_ = next_ + gap_;
    return size_;
  }
  Time NextTimeout() const override { return sent_ == count_ ? Time::Infinite() : next_; }
  uint64_t sent_ = 0;
  uint64_t acks_ = 0;

 private:
  uint64_t count_;
  size_t size_;
  Duration gap_;
  bool touch_;
  Time next_;
};

// Acknowledges every 32nd datagram with a 64-byte one; optionally checks the CRC.
class Receiver : public SimNode {
 public:
  explicit Receiver(bool touch) : touch_(touch) {}
  void OnDatagram(Time, std::span<const uint8_t> d, Ecn) override {
    if (touch_) {
      uint32_t crc;
      std::memcpy(&crc, d.data() + d.size() - 4, 4);
      bad_ += wire::Crc32c(d.data(), d.size() - 4) != crc;
    }
    if (++received_ % 32 == 0) ++owed_;
  }
  void OnTimeout(Time) override {}
  size_t PollTransmit(Time, uint8_t* buf, size_t, TransmitInfo*) override {
    if (owed_ == 0) return 0;
    --owed_;
    std::memset(buf, 0, 64);
    return 64;
  }
  Time NextTimeout() const override { return Time::Infinite(); }
  uint64_t received_ = 0;
  uint64_t bad_ = 0;

 private:
  bool touch_;
  uint64_t owed_ = 0;
};

void RunSim(benchmark::State& state, bool touch) {
  const uint64_t packets = static_cast<uint64_t>(state.range(0));
  uint64_t total = 0;
  for (auto _ : state) {
    SimulatorOptions opt;
    opt.link = Spec("rate=100gbit,rtt=58ms,loss=1e-4");
    opt.max_datagram = 9000;
    Simulator sim(opt);
    // 8960-byte datagrams + 28 bytes overhead at 100 Gbit/s: 719 ns each.
    Sender tx(packets, 8960, Duration::Nanoseconds(720), touch);
    Receiver rx(touch);
    sim.AddPair(&tx, &rx);
    sim.Run(Time::Infinite(), nullptr);
    total += sim.forward().counters().offered + sim.reverse().counters().offered;
    if (rx.bad_ != 0) state.SkipWithError("CRC mismatch");
  }
  state.SetItemsProcessed(static_cast<int64_t>(total));
}

void BM_SimulatorEvents(benchmark::State& state) { RunSim(state, false); }
void BM_SimulatorBytes(benchmark::State& state) { RunSim(state, true); }
BENCHMARK(BM_SimulatorEvents)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SimulatorBytes)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace longhaul::sim

BENCHMARK_MAIN();
