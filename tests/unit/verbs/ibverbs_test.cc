// The run-time loading of libibverbs (transport/drivers/verbs/ibverbs.h): on this build
// machine rdma-core's library is installed with its headers (tools/setup.sh), so it
// loads and every entry point the driver calls resolves. That the binaries do not name it
// (they start without rdma-core) is nccl_bundle_files_test's: the bundled plugin's
// libraries must all be glibc's or in the bundle, and libibverbs is neither.
#include "transport/drivers/verbs/ibverbs.h"

#include "gtest/gtest.h"

namespace longhaul::verbs {
namespace {

TEST(Ibverbs, LoadsAndResolvesEveryEntryPoint) {
  absl::StatusOr<const IbverbsApi*> api = LoadIbverbs();
  ASSERT_TRUE(api.ok()) << api.status();
  const void* const* p = reinterpret_cast<const void* const*>(*api);
  for (size_t i = 0; i < sizeof(IbverbsApi) / sizeof(void*); ++i) {
    EXPECT_NE(p[i], nullptr) << "entry " << i;
  }
  EXPECT_STREQ((*api)->wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_EQ(&Ibverbs(), *api);
  // The same library every time.
  absl::StatusOr<const IbverbsApi*> again = LoadIbverbs();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api);
}

}  // namespace
}  // namespace longhaul::verbs
