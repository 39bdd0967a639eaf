// ParseToolFlags: the command-line parsing the tools share (tools/common/tool_flags.h).
#include "tools/common/tool_flags.h"

#include <sstream>
#include <string>
#include <vector>

#include "gflags/gflags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

DEFINE_int32(tf_port, 5201, "a port");
DEFINE_bool(tf_json, false, "print JSON");
DEFINE_string(tf_name, "", "a name that is long enough to wrap the help line past eighty "
                           "columns so the wrapping is exercised");

namespace longhaul {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ToolFlagAction> Parse(std::vector<std::string> args, bool short_version = true) {
  ToolFlagOptions o;
  o.dirs = {"tests/unit/tool_common/"};
  o.short_name = [](const std::string& s) -> const char* { return s == "p" ? "tf_port" : nullptr; };
  o.version_flag = short_version;
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseToolFlags(static_cast<int>(argv.size()), argv.data(), o);
}

class ToolFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLAGS_tf_port = 5201;
    FLAGS_tf_json = false;
    FLAGS_tf_name = "";
  }
};

TEST_F(ToolFlagsTest, AcceptsTheUsualForms) {
  ASSERT_EQ(*Parse({"--tf_port=7", "--tf_json", "--tf_name", "x y"}), ToolFlagAction::kRun);
  EXPECT_EQ(FLAGS_tf_port, 7);
  EXPECT_TRUE(FLAGS_tf_json);
  EXPECT_EQ(FLAGS_tf_name, "x y");
  ASSERT_EQ(*Parse({"--notf_json", "-p", "9"}), ToolFlagAction::kRun);
  EXPECT_FALSE(FLAGS_tf_json);
  EXPECT_EQ(FLAGS_tf_port, 9);
  ASSERT_EQ(*Parse({"--tf_json=false", "-p=11"}), ToolFlagAction::kRun);
  EXPECT_EQ(FLAGS_tf_port, 11);
}

TEST_F(ToolFlagsTest, HelpAndVersion) {
  EXPECT_EQ(*Parse({"--tf_port=1", "--help"}), ToolFlagAction::kHelp);
  EXPECT_EQ(*Parse({"-h"}), ToolFlagAction::kHelp);
  EXPECT_EQ(*Parse({"--version"}), ToolFlagAction::kVersion);
  EXPECT_EQ(*Parse({"-v"}), ToolFlagAction::kVersion);
  // --version needs no opt-in; -v only with version_flag (elsewhere it is glog's --v).
  EXPECT_EQ(*Parse({"--tf_port=1", "--version"}, false), ToolFlagAction::kVersion);
  absl::StatusOr<ToolFlagAction> v = Parse({"-v"}, false);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("'--v' needs a value"));
}

TEST_F(ToolFlagsTest, ErrorsNameTheProblem) {
  auto message = [](std::vector<std::string> args) {
    absl::StatusOr<ToolFlagAction> r = Parse(std::move(args));
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    return std::string(r.status().message());
  };
  EXPECT_EQ(message({"--frobnicate"}), "unknown flag '--frobnicate'");
  EXPECT_EQ(message({"-x"}), "unknown flag '-x'");
  EXPECT_EQ(message({"--tf_port"}), "flag '--tf_port' needs a value");
  EXPECT_THAT(message({"--tf_port=many"}), HasSubstr("bad value 'many' for --tf_port"));
  EXPECT_EQ(message({"stray"}), "unexpected argument 'stray'");
  // gflags' own flags are not the tool's.
  EXPECT_EQ(message({"--flagfile=/etc/passwd"}), "unknown flag '--flagfile'");
  EXPECT_EQ(message({"--notf_port"}), "unknown flag '--notf_port'");
  // A failed parse leaves earlier flags set but never a half-parsed value.
  EXPECT_EQ(FLAGS_tf_port, 5201);
}

TEST_F(ToolFlagsTest, HelpListsOnlyTheToolsFlagsWrapped) {
  std::ostringstream out;
  PrintToolFlags(out, {"tests/unit/tool_common/"});
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("--tf_port"));
  EXPECT_THAT(text, HasSubstr("(default: 5201)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("--flagfile")));
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
}

TEST(FormatFlagHelpTest, ShortNamesShareTheLineWithTheText) {
  EXPECT_EQ(FormatFlagHelp("port", "the port (default: 1)"),
            "  --port             the port (default: 1)\n");
  // 16 characters: the longest name that fits, one space before the text column.
  EXPECT_EQ(FormatFlagHelp("max_virtual_time", "stop"), "  --max_virtual_time stop\n");
}

TEST(FormatFlagHelpTest, LongNamesLeaveAGapByMovingTheTextDown) {
  // 17 characters would end exactly at the text column and run into the text.
  EXPECT_EQ(FormatFlagHelp("cc_loss_threshold", "cc=bbr: per-round loss rate"),
            "  --cc_loss_threshold\n"
            "                     cc=bbr: per-round loss rate\n");
  EXPECT_EQ(FormatFlagHelp("max_inflight_messages", "Most messages."),
            "  --max_inflight_messages\n"
            "                     Most messages.\n");
}

TEST(FormatFlagHelpTest, WrapsTheTextUnderItsColumn) {
  const std::string text =
      "Most bytes in flight; must cover rate x RTT (100gbit x 58ms = 725MB). (default: 1GiB)";
  EXPECT_EQ(FormatFlagHelp("window", text),
            "  --window           Most bytes in flight; must cover rate x RTT (100gbit x 58ms\n"
            "                     = 725MB). (default: 1GiB)\n");
  const std::string wrapped = FormatFlagHelp("reorder_rtt_fraction", text + " " + text);
  std::istringstream lines(wrapped);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "  --reorder_rtt_fraction");
  int continuation = 0;
  while (std::getline(lines, line)) {
    ++continuation;
    EXPECT_LE(line.size(), kFlagHelpWidth) << line;
    EXPECT_EQ(line.substr(0, kFlagHelpIndent), std::string(kFlagHelpIndent, ' ')) << line;
    EXPECT_NE(line[kFlagHelpIndent], ' ') << line;
  }
  EXPECT_GE(continuation, 3);
}

TEST(ToolUsageTest, MessageNamesTheToolAndPointsAtHelp) {
  constexpr ToolUsage kUsage("longhaul-x");
  EXPECT_STREQ(kUsage.tool(), "longhaul-x");
  EXPECT_EQ(kUsage.Message("--link is required"),
            "longhaul-x: --link is required\n(see longhaul-x --help)\n");
}

TEST(ToolUsageTest, OrReturnsTheValue) {
  constexpr ToolUsage kUsage("longhaul-x");
  EXPECT_EQ(kUsage.Or(absl::StatusOr<int>(7), "port"), 7);
  EXPECT_EQ(kUsage.Or(absl::StatusOr<std::string>("abc"), "name"), "abc");
}

TEST(ToolUsageTest, ChoiceReturnsTheNamedValue) {
  constexpr ToolUsage kUsage("longhaul-x");
  EXPECT_TRUE(kUsage.Choice<bool>("on", "payload", {{"on", true}, {"off", false}}));
  EXPECT_FALSE(kUsage.Choice<bool>("off", "payload", {{"on", true}, {"off", false}}));
  EXPECT_EQ(kUsage.Choice<int>("c", "pick", {{"a", 1}, {"b", 2}, {"c", 3}}), 3);
}

TEST(ToolUsageDeathTest, FailExitsWithTheUsageStatus) {
  constexpr ToolUsage kUsage("longhaul-x");
  // The pattern's '.' stand for the parentheses (a POSIX regex).
  EXPECT_EXIT(kUsage.Fail("--top_k must be at most 32"),
              ::testing::ExitedWithCode(kUsageExitStatus),
              "^longhaul-x: --top_k must be at most 32\n.see longhaul-x --help.\n$");
  EXPECT_EQ(kUsageExitStatus, 2);
}

TEST(ToolUsageDeathTest, OrFailsNamingTheFlag) {
  constexpr ToolUsage kUsage("longhaul-x");
  EXPECT_EXIT(kUsage.Or(absl::StatusOr<int>(absl::InvalidArgumentError("bad size '12x'")), "bytes"),
              ::testing::ExitedWithCode(2), "longhaul-x: --bytes: bad size '12x'");
}

TEST(ToolUsageDeathTest, ChoiceFailsListingTheNamesInOrder) {
  constexpr ToolUsage kUsage("longhaul-x");
  // Case matters: "ON" is not "on".
  EXPECT_EXIT(kUsage.Choice<bool>("ON", "payload", {{"on", true}, {"off", false}}),
              ::testing::ExitedWithCode(kUsageExitStatus),
              "^longhaul-x: --payload: unknown 'ON' .on, off.\n.see longhaul-x --help.\n$");
}

}  // namespace
}  // namespace longhaul
