// engine/output_guard.h: the sampler's veto and the redactor on one sequence,
// with a real compiled Guard and a hand-written vocabulary (no model).
#include "engine/output_guard.h"

#include <gtest/gtest.h>

#include "guard/policy.h"

namespace zl {
namespace {

std::shared_ptr<const guard::Guard> compile(const std::string& toml) {
  auto policy = guard::parse_policy(toml);
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  auto g = guard::Guard::compile(std::move(policy).value());
  EXPECT_TRUE(g.ok());
  return g.value();
}

constexpr const char* kPolicy = R"([[rule]]
name = "codename"
phrases = ["falcon"]
output = "mask"

[[rule]]
name = "pii"
pii = ["email"]
output = "redact"

[[rule]]
name = "halt"
phrases = ["launch code"]
output = "stop"
)";

TEST(OutputGuard, VetoRefusesTheTokenThatCompletesAPhraseAndReportsItOnce) {
  auto g = compile(kPolicy);
  const std::vector<std::string> vocab{"fal", "con", "cons", "x"};
  auto table = guard::build_token_mask(*g, vocab);
  OutputGuard og(g, table.get());
  ASSERT_TRUE(og.masks());
  Sampler sampler({.temperature = 0.0f});
  // "fal" accepted, then "con" (best) is refused: "cons" completes it too, "x" is taken.
  std::vector<float> l0{5, 0, 0, 0};
  ASSERT_EQ(*sampler.sample(l0, nullptr, og.veto()), 0);
  og.accept(0);
  EXPECT_FALSE(og.take_refusal());
  std::vector<float> l1{0, 5, 4, 3};
  ASSERT_EQ(*sampler.sample(l1, nullptr, og.veto()), 3);
  og.accept(3);
  const std::optional<GuardAction> a = og.take_refusal();
  ASSERT_TRUE(a);
  EXPECT_EQ(g->policy().rules[a->rule].name, "codename");
  EXPECT_EQ(a->action, "mask");
  EXPECT_FALSE(og.take_refusal());
  // After "x" the phrase starts over: "con" is allowed.
  std::vector<float> l2{0, 5, 0, 0};
  EXPECT_EQ(*sampler.sample(l2, nullptr, og.veto()), 1);
}

TEST(OutputGuard, AnAnswerCannotFinishAPhraseThePromptBegan) {
  auto g = compile(kPolicy);
  const std::vector<std::string> vocab{"fal", "con", "cons", "x"};
  auto table = guard::build_token_mask(*g, vocab);
  OutputGuard og(g, table.get());
  const std::vector<int32_t> prompt{3, 0};  // "xfal"
  og.start_after(prompt);
  EXPECT_TRUE(og.veto()(1));
  EXPECT_FALSE(og.veto()(3));
  OutputGuard fresh(g, table.get());
  EXPECT_FALSE(fresh.veto()(1));
}

TEST(OutputGuard, RedactsAcrossPiecesAndReleasesTheRestAtTheEnd) {
  auto g = compile(kPolicy);
  OutputGuard og(g, nullptr);
  ASSERT_TRUE(og.redacts());
  std::string out;
  std::vector<GuardAction> actions;
  for (std::string_view piece : {"mail ", "bob", "@exa", "mple.c", "om now", " and fal"}) {
    GuardedText t = og.feed(piece);
    EXPECT_FALSE(t.stop);
    // Nothing released ever holds a part of the address.
    EXPECT_EQ(t.text.find("bob"), std::string::npos);
    out += t.text;
    actions.insert(actions.end(), t.actions.begin(), t.actions.end());
  }
  GuardedText last = og.finish("");
  out += last.text;
  actions.insert(actions.end(), last.actions.begin(), last.actions.end());
  EXPECT_EQ(out, "mail [REDACTED:email] now and fal");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].action, "redact");
  EXPECT_EQ(actions[0].kind, "email");
}

TEST(OutputGuard, AStopKeepsTheTextBeforeTheMatchAndReleasesNothingAfter) {
  auto g = compile(kPolicy);
  OutputGuard og(g, nullptr);
  std::string out = og.feed("the launch").text;
  GuardedText t = og.feed(" code is 42");
  out += t.text;
  EXPECT_TRUE(t.stop);
  EXPECT_TRUE(og.stopped());
  EXPECT_EQ(out, "the ");
  ASSERT_FALSE(t.actions.empty());
  EXPECT_EQ(t.actions.back().action, "stop");
  EXPECT_TRUE(og.feed("more").text.empty());
  EXPECT_TRUE(og.finish("").text.empty());
}

TEST(OutputGuard, NoGuardPassesTextThrough) {
  OutputGuard og(nullptr, nullptr);
  EXPECT_FALSE(og.redacts());
  EXPECT_FALSE(og.masks());
  EXPECT_FALSE(og.veto());
  EXPECT_EQ(og.feed("abc").text, "abc");
}

}  // namespace
}  // namespace zl
