// The settings of `--draft-model` (cli/draft_setup.h, cli/serve_config.h): draft-model and
// draft-slots from flags, environment and TOML, and the method that --speculative resolves to
// with and without a draft model. No model needed.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/draft_setup.h"
#include "cli/engine_fit.h"
#include "cli/serve_config.h"
#include "model/model.h"

namespace zl::cli {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  EnvFn fn() {
    return [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(DraftSetup, MethodTable) {
  struct Case {
    std::string value, draft, want;
  };
  for (const Case& c : std::vector<Case>{{"", "", "off"},
                                         {"", "d.gguf", "draft"},
                                         {"off", "", "off"},
                                         {"off", "d.gguf", "off"},
                                         {"false", "d.gguf", "off"},
                                         {"false", "", "off"},
                                         {"ngram", "", "ngram"},
                                         {"draft", "d.gguf", "draft"},
                                         {"true", "", "ngram"},
                                         {"true", "d.gguf", "draft"}}) {
    auto m = resolve_spec_method(c.value, "--speculative " + c.value, c.draft, "--draft-model " + c.draft);
    ASSERT_TRUE(m.ok()) << c.value << " / " << c.draft << ": " << m.status().to_string();
    EXPECT_EQ(*m, c.want) << c.value << " / " << c.draft;
  }
  auto no_draft = resolve_spec_method("draft", "--speculative draft", "", "");
  ASSERT_FALSE(no_draft.ok());
  EXPECT_EQ(no_draft.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(no_draft.status().message().find("--speculative draft"), std::string::npos) << no_draft.status().message();
  EXPECT_NE(no_draft.status().message().find("--draft-model"), std::string::npos) << no_draft.status().message();
  auto conflict = resolve_spec_method("ngram", "ZEROLAYER_SPECULATIVE=ngram", "d.gguf", "draft_model = d.gguf in x.toml");
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("ZEROLAYER_SPECULATIVE=ngram conflicts with draft_model = d.gguf in x.toml"),
            std::string::npos)
      << conflict.status().message();
  // Exactly the words the message lists (review 23 #2): no other spelling of a boolean.
  for (const char* bad : {"eagle", "Draft", "on", "2", "TRUE", "False"}) {
    for (const char* draft : {"", "d.gguf"}) {
      auto m = resolve_spec_method(bad, std::string("--speculative ") + bad, draft, "--draft-model d.gguf");
      ASSERT_FALSE(m.ok()) << bad;
      EXPECT_EQ(m.status().kind(), ErrorKind::kInvalidArgument);
      EXPECT_EQ(m.status().message(), std::string("--speculative ") + bad +
                                          ": speculative must be off, ngram, draft, true or false (or 1/0, yes/no), got '" + bad + "'");
    }
  }
}

TEST(DraftSetup, ServeSettingsFromFlagEnvAndToml) {
  FakeEnv env;
  auto def = resolve_serve_config({}, {}, env.fn());
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->draft_model_path, "");
  EXPECT_EQ(def->draft_slots, 0);
  EXPECT_EQ(def->speculative, "off");

  const std::string path = ::testing::TempDir() + "draft_setup_test.toml";
  std::ofstream(path) << "draft_model = \"/m/draft.gguf\"\ndraft_slots = 3\ndraft_p_min = 0.5\n";
  auto toml = resolve_serve_config({{"config", path}}, {}, env.fn());
  ASSERT_TRUE(toml.ok()) << toml.status().to_string();
  EXPECT_EQ(toml->draft_model_path, "/m/draft.gguf");
  EXPECT_EQ(toml->draft_slots, 3);
  EXPECT_EQ(toml->draft_p_min, 0.5);
  EXPECT_EQ(def->draft_p_min, 0.8);
  EXPECT_EQ(toml->speculative, "draft");  // a draft model without speculative: draft
  EXPECT_EQ(toml->given.at("draft-model"), "draft_model = /m/draft.gguf in " + path);

  // TOML floats keep every digit (they once went through std::to_string: 1e-7 became 0).
  const std::string tiny = ::testing::TempDir() + "draft_setup_tiny.toml";
  std::ofstream(tiny) << "draft_model = \"/m/draft.gguf\"\ndraft_p_min = 1e-7\nshadow_fraction = 0.123456789\n";
  auto exact = resolve_serve_config({{"config", tiny}}, {}, env.fn());
  ASSERT_TRUE(exact.ok()) << exact.status().to_string();
  EXPECT_EQ(exact->draft_p_min, 1e-7);
  EXPECT_EQ(exact->shadow_fraction, 0.123456789);
  EXPECT_EQ(exact->given.at("draft-p-min"), "draft_p_min = 1e-07 in " + tiny);

  env.vars["ZEROLAYER_DRAFT_MODEL"] = "/env/draft.gguf";
  env.vars["ZEROLAYER_DRAFT_SLOTS"] = "2";
  env.vars["ZEROLAYER_DRAFT_P_MIN"] = "0";
  auto from_env = resolve_serve_config({{"config", path}}, {}, env.fn());
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->draft_p_min, 0.0);
  EXPECT_EQ(from_env->draft_model_path, "/env/draft.gguf");
  EXPECT_EQ(from_env->draft_slots, 2);

  auto flag = resolve_serve_config({{"config", path}, {"draft-model", "/flag/d.gguf"}, {"draft-slots", "5"},
                                    {"speculative", "off"}},
                                   {}, env.fn());
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->draft_model_path, "/flag/d.gguf");
  EXPECT_EQ(flag->draft_slots, 5);
  EXPECT_EQ(flag->speculative, "off");  // loaded; only requests that ask speculate
  env.vars.clear();

  std::ofstream(path) << "draft_model = \"/m/draft.gguf\"\nspeculative = true\n";
  auto on = resolve_serve_config({{"config", path}}, {}, env.fn());
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_EQ(on->speculative, "draft");

  // A TOML integer other than 1/0, or another spelling of a boolean, is refused, as from the environment.
  std::ofstream(path) << "speculative = 2\n";
  auto two = resolve_serve_config({{"config", path}}, {}, env.fn());
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("speculative = 2 in " + path + ": speculative must be off, ngram, draft, true or "
                                        "false (or 1/0, yes/no), got '2'"),
            std::string::npos)
      << two.status().message();
  env.vars["ZEROLAYER_SPECULATIVE"] = "on";
  auto word_on = resolve_serve_config({}, {}, env.fn());
  ASSERT_FALSE(word_on.ok());
  EXPECT_NE(word_on.status().message().find("ZEROLAYER_SPECULATIVE=on: speculative must be off"), std::string::npos)
      << word_on.status().message();
  env.vars["ZEROLAYER_SPECULATIVE"] = "yes";
  auto yes = resolve_serve_config({}, {}, env.fn());
  ASSERT_TRUE(yes.ok()) << yes.status().to_string();
  EXPECT_EQ(yes->speculative, "ngram");
  env.vars["ZEROLAYER_SPECULATIVE"] = "false";
  auto off = resolve_serve_config({}, {}, env.fn());
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_EQ(off->speculative, "off");
  env.vars.clear();

  std::ofstream(path) << "draft_model = \"/m/draft.gguf\"\nspeculative = \"ngram\"\n";
  auto conflict = resolve_serve_config({{"config", path}}, {}, env.fn());
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("speculative = ngram in " + path), std::string::npos)
      << conflict.status().message();
  EXPECT_NE(conflict.status().message().find("draft_model = /m/draft.gguf"), std::string::npos)
      << conflict.status().message();

  auto no_draft = resolve_serve_config({{"speculative", "draft"}}, {}, env.fn());
  ASSERT_FALSE(no_draft.ok());
  EXPECT_NE(no_draft.status().message().find("--speculative draft"), std::string::npos);
  EXPECT_NE(no_draft.status().message().find("draft-model"), std::string::npos);

  for (const char* bad : {"-1", "4097", "two", ""}) {
    auto b = resolve_serve_config({{"draft-model", "d.gguf"}, {"draft-slots", bad}}, {}, env.fn());
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--draft-slots"), std::string::npos) << b.status().message();
  }
  std::ofstream(path) << "draft_modle = \"x\"\n";  // misspelt: an error, not ignored
  EXPECT_FALSE(resolve_serve_config({{"config", path}}, {}, env.fn()).ok());
}

// Without --kv-size the KV cache takes at most half of the memory available; a draft model's
// slots share that half (tiny-llama: 2 KiB of K/V a token, for the model and its Q2_K draft).
TEST(DraftSetup, KvBudgetSharedWithTheDraftModel) {
  const std::string dir = std::string(ZL_SHARED_DIR) + "/models/";
  auto target = load_model(dir + "tiny-llama-F32.gguf");
  auto draft = load_model(dir + "tiny-llama-Q2_K.gguf");
  if (!target.ok() || !draft.ok()) GTEST_SKIP() << "SKIPPED: tiny-llama models absent (needs ../shared)";
  const ModelConfig& mc = (*target)->config;
  EngineConfig c{.n_ctx = 256};
  c.draft_model = draft->get();
  const uint64_t available = uint64_t{8} << 20;  // half: 4 MiB, 2048 tokens of one cache alone
  const EngineConfig shared = share_kv_budget_with_draft(mc, c, available);
  const EngineConfig r = resolve_engine_config(mc, shared);
  const EngineMemory m = engine_memory(mc, r);
  EXPECT_LE(m.kv_bytes + m.draft_kv_bytes, available / 2) << r.n_kv_tokens << " tokens, " << r.draft_slots << " slots";
  EXPECT_GE(r.n_kv_tokens, 3 * 256);  // lowered no further than the budget asks
  EXPECT_LE(r.n_kv_tokens, 1024);
  EXPECT_GE(r.draft_slots, 3);
  // Unchanged: plenty of memory, an explicit size, no draft model.
  EXPECT_EQ(share_kv_budget_with_draft(mc, c, uint64_t{1} << 40).n_kv_tokens, 0);
  EngineConfig sized = c;
  sized.n_kv_tokens = 4096;
  EXPECT_EQ(share_kv_budget_with_draft(mc, sized, available).n_kv_tokens, 4096);
  EngineConfig plain{.n_ctx = 256};
  EXPECT_EQ(share_kv_budget_with_draft(mc, plain, available).n_kv_tokens, 0);
  // Never below one context, even when that does not fit (create_engine then refuses it).
  EXPECT_EQ(resolve_engine_config(mc, share_kv_budget_with_draft(mc, c, uint64_t{1} << 20)).n_kv_tokens, 256);
}

}  // namespace
}  // namespace zl::cli
