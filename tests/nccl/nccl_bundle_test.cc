// The plugin of the bundle (<build>/nccl-bundle, tools/nccl/CMakeLists.txt) loaded with
// the harness (nccl_plugin_fixture.h; LONGHAUL_NCCL_PLUGIN is the bundle's copy): it
// loads from the bundle, brings the libraries this process does not have from there,
// and carries messages. tests/nccl/bundle_test.py checks the files themselves.
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/nccl/nccl_plugin_fixture.h"

namespace longhaul::nccl::plugin_test {
namespace {

// Loaded objects: file name -> path.
std::map<std::string, std::string> LoadedObjects() {
  std::map<std::string, std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const size_t slash = path.rfind('/');
        if (slash != std::string::npos) {
          (*static_cast<std::map<std::string, std::string>*>(data))[path.substr(slash + 1)] = path;
        }
        return 0;
      },
      &out);
  return out;
}

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

TEST_F(PluginTest, BundledPluginLoadsWithItsLibrariesFromTheBundle) {
  const std::string bundle = Dir(LONGHAUL_NCCL_PLUGIN);
  Dl_info info{};
  ASSERT_NE(dladdr(net_, &info), 0);
  EXPECT_EQ(Dir(info.dli_fname), bundle) << info.dli_fname;
  // Libraries this test binary does not link come from the bundle, through RUNPATH.
  const std::map<std::string, std::string> loaded = LoadedObjects();
  for (const char* lib :
       {"libglog.so.1", "libgflags.so.2.2", "libisal.so.2", "libunwind.so.8", "liblzma.so.5"}) {
    auto it = loaded.find(lib);
    ASSERT_NE(it, loaded.end()) << lib << " is not loaded";
    EXPECT_EQ(Dir(it->second), bundle) << lib;
  }
}

TEST_F(PluginTest, BundledPluginCarriesMessages) {
  void* ctx = nullptr;
  Init(&ctx);
  Comms c;
  Connect(ctx, &c);
  uint32_t seed = 1;
  for (size_t size : {size_t{0}, size_t{1024}, size_t{1} << 20, size_t{8} << 20}) {
    std::vector<uint8_t> out(size), in(size + 16, 0xee);
    Fill(&out, ++seed);
    void* r = Recv(c.recv, in.data(), in.size(), 2);
    void* s = Send(c.send, out.data(), out.size(), 2);
    int got = -1;
    ASSERT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
    ASSERT_EQ(WaitDone(net_, r, &got), ncclSuccess);
    EXPECT_EQ(got, static_cast<int>(size));
    if (size > 0) {
      EXPECT_EQ(memcmp(in.data(), out.data(), size), 0) << size;
    }
  }
  Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
}

// NCCL_LONGHAUL_ENGINES=2 in the bundle: two comms take the two lanes, one per engine
// (the listening port shared by both engines), and carry their messages.
TEST_F(PluginTest, BundledPluginRunsTwoEngines) {
  setenv("NCCL_LONGHAUL_ENGINES", "2", 1);
  void* ctx = nullptr;
  Init(&ctx);
  Comms pairs[2];
  for (Comms& c : pairs) {
    Connect(ctx, &c);
    ASSERT_FALSE(HasFatalFailure());
  }
  EXPECT_TRUE(LoggedInfo("endpoint: 2 engines"));
  EXPECT_TRUE(LoggedInfo("lane 0, engine "));
  EXPECT_TRUE(LoggedInfo("lane 1, engine "));
  uint32_t seed = 50;
  for (Comms& c : pairs) {
    std::vector<uint8_t> out((2 << 20) + 3), in(out.size());
    Fill(&out, ++seed);
    void* r = Recv(c.recv, in.data(), in.size(), 4);
    void* s = Send(c.send, out.data(), out.size(), 4);
    EXPECT_EQ(WaitDone(net_, s, nullptr), ncclSuccess);
    EXPECT_EQ(WaitDone(net_, r, nullptr), ncclSuccess);
    EXPECT_EQ(in, out);
  }
  for (Comms& c : pairs) Close(ctx, &c);
  EXPECT_EQ(net_->finalize(ctx), ncclSuccess);
  unsetenv("NCCL_LONGHAUL_ENGINES");
}

}  // namespace
}  // namespace longhaul::nccl::plugin_test
