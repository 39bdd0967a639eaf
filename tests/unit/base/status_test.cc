#include "transport/base/status.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

absl::Status FailIf(bool fail) {
  return fail ? absl::InvalidArgumentError("failed") : absl::OkStatus();
}

absl::Status Chain(bool fail, int* reached) {
  LH_RETURN_IF_ERROR(FailIf(fail));
  ++*reached;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool fail, int v) {
  if (fail) return absl::NotFoundError("no int");
  return std::make_unique<int>(v);
}

absl::StatusOr<int> AddOne(bool fail) {
  LH_ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(fail, 41));  // move-only works
  LH_ASSIGN_OR_RETURN(auto q, MakeInt(false, 0));                  // twice in one scope
  return *p + *q + 1;
}

TEST(StatusMacrosTest, ReturnIfError) {
  int reached = 0;
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
  absl::Status s = Chain(true, &reached);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "failed");
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  absl::StatusOr<int> ok = AddOne(false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 42);
  absl::StatusOr<int> bad = AddOne(true);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(bad.status().message(), "no int");
}

}  // namespace
}  // namespace longhaul
