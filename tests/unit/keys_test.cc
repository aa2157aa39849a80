// The keys file (limits/keys.h): parsing, every error with its line, the
// SHA-256 form, lookup, and reload semantics.
#include "limits/keys.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "support/temp_files.h"

namespace zl::limits {
namespace {

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_keys_test");

std::string hex(const KeyDigest& d) {
  std::string out;
  char buf[3];
  for (unsigned char c : d) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// The error of parsing `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
  auto t = KeyTable::parse(text, "keys.toml");
  return t.ok() ? "" : t.status().message();
}

TEST(Keys, Sha256MatchesTheStandardVectors) {
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Keys, ParsesEntriesWithLimitsAndFindsKeys) {
  const std::string text =
      "# keys\n"
      "[[key]]\n"
      "name = \"team-a\"\n"
      "key = \"sk-a\"\n"
      "requests_per_minute = 60\n"
      "input_tokens_per_minute = 200000\n"
      "output_tokens_per_minute = 40000\n"
      "max_concurrent = 8\n"
      "\n"
      "[[key]]\n"
      "name = \"team.b_2\"\n"
      "key_sha256 = \"" + hex(sha256("sk-b")) + "\"\n";
  auto t = KeyTable::parse(text, "keys.toml");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const KeyTable& table = **t;
  ASSERT_EQ(table.entries().size(), 2u);
  const KeyEntry& a = table.entries()[0];
  EXPECT_EQ(a.name, "team-a");
  EXPECT_EQ(a.line, 2);
  EXPECT_EQ(a.limits, (KeyLimits{.requests_per_minute = 60, .input_tokens_per_minute = 200000,
                                 .output_tokens_per_minute = 40000, .max_concurrent = 8}));
  EXPECT_EQ(table.entries()[1].limits, KeyLimits{});  // absent: unlimited
  EXPECT_EQ(table.find("sk-a"), &a);
  EXPECT_EQ(table.find("sk-b"), &table.entries()[1]);  // by its digest
  EXPECT_EQ(table.find("sk-c"), nullptr);
  EXPECT_EQ(table.find(""), nullptr);
  EXPECT_EQ(table.find("sk-a "), nullptr);
  EXPECT_EQ(table.by_name("team.b_2"), &table.entries()[1]);
  EXPECT_EQ(table.by_name("team"), nullptr);
  // A hex digest in capitals is the same digest.
  std::string upper = hex(sha256("sk-c"));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto t2 = KeyTable::parse("[[key]]\nname = \"c\"\nkey_sha256 = \"" + upper + "\"\n", "k");
  ASSERT_TRUE(t2.ok());
  EXPECT_NE((*t2)->find("sk-c"), nullptr);
}

TEST(Keys, FindPicksTheOneMatchingEntryAmongMany) {
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += "[[key]]\nname = \"k" + std::to_string(i) + "\"\n";
    // Half plaintext, half digests; keys sharing long prefixes.
    const std::string k = "sk-shared-prefix-" + std::to_string(i);
    text += i % 2 ? "key = \"" : "key_sha256 = \"";
    text += i % 2 ? k : hex(sha256(k));
    text += "\"\n";
  }
  auto t = KeyTable::parse(text, "many.toml");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  for (int i = 0; i < 50; ++i) {
    const KeyEntry* e = (*t)->find("sk-shared-prefix-" + std::to_string(i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->name, std::string("k").append(std::to_string(i)));
  }
  EXPECT_EQ((*t)->find("sk-shared-prefix-50"), nullptr);
  EXPECT_EQ((*t)->find("sk-shared-prefix-"), nullptr);
}

TEST(Keys, AnEmptyFileHasNoKeys) {
  auto t = KeyTable::parse("# nobody yet\n", "keys.toml");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE((*t)->entries().empty());
  EXPECT_EQ((*t)->find("x"), nullptr);
}

TEST(Keys, EveryErrorNamesTheFileAndTheLine) {
  const std::string head = "[[key]]\nname = \"a\"\n";
  struct Case {
    std::string text;
    std::string want;  // a substring of the message, after "keys file keys.toml, line N: "
    int line;
  };
  const Case cases[] = {
      {"[[key]\nname = \"a\"\n", "", 1},                                   // TOML syntax
      {"[[key]]\nname = \"a\"\nkey = \"x\"\nname = \"b\"\n", "", 4},     // TOML: redefined
      {"stray = 1\n", "unknown key 'stray'", 1},
      {"key = \"sk\"\n", "'key' must be [[key]] tables", 1},
      {"[[key]]\nkey = \"x\"\n", "without 'name'", 1},
      {"[[key]]\nname = \"\"\nkey = \"x\"\n", "'name' must be 1 to 64", 2},
      {"[[key]]\nname = \"a b\"\nkey = \"x\"\n", "'name' must be 1 to 64", 2},
      {"[[key]]\nname = \"a:b\"\nkey = \"x\"\n", "'name' must be 1 to 64", 2},
      {"[[key]]\nname = \"" + std::string(65, 'n') + "\"\nkey = \"x\"\n", "'name' must be 1 to 64", 2},
      {"[[key]]\nname = 7\nkey = \"x\"\n", "'name' must be 1 to 64", 2},
      {head, "neither 'key' nor 'key_sha256'", 1},
      {head + "key = \"x\"\nkey_sha256 = \"" + std::string(64, '0') + "\"\n", "not both", 4},
      {head + "key = \"\"\n", "'key' must not be empty", 3},
      {head + "key = 5\n", "'key' must be a string", 3},
      {head + "key_sha256 = \"abc\"\n", "64 hex digits", 3},
      {head + "key_sha256 = \"" + std::string(63, '0') + "g\"\n", "64 hex digits", 3},
      {head + "key = \"x\"\nrequests_per_minute = -1\n", "'requests_per_minute' must be a non-negative integer", 4},
      {head + "key = \"x\"\nmax_concurrent = 9223372036854775807\n", "'max_concurrent' must be at most 9007199254740992", 4},
      {head + "key = \"x\"\ninput_tokens_per_minute = 1.5\n", "'input_tokens_per_minute' must be a non-negative", 4},
      {head + "key = \"x\"\noutput_tokens_per_minute = \"9\"\n", "'output_tokens_per_minute' must be", 4},
      {head + "key = \"x\"\nmax_concurrent = true\n", "'max_concurrent' must be", 4},
      {head + "key = \"x\"\nrpm = 5\n", "unknown field 'rpm'", 4},
      {head + "key = \"x\"\n\n[[key]]\nname = \"a\"\nkey = \"y\"\n", "name 'a' is used twice (also line 1)", 5},
      {head + "key = \"x\"\n\n[[key]]\nname = \"b\"\nkey = \"x\"\n", "has the same key as 'a'", 5},
  };
  for (const Case& c : cases) {
    const std::string err = parse_error(c.text);
    SCOPED_TRACE(c.text);
    EXPECT_EQ(err.rfind("keys file keys.toml, line " + std::to_string(c.line) + ": ", 0), 0u) << err;
    EXPECT_NE(err.find(c.want), std::string::npos) << err;
  }
}

TEST(Keys, NoErrorQuotesAKey) {
  const std::string secret = "sk-very-secret-value";
  for (const std::string& text :
       {"[[key]]\nname = \"a\"\nkey = \"" + secret + "\"\nkey_sha256 = \"" + std::string(64, '0') + "\"\n",
        "[[key]]\nname = \"a\"\nkey = \"" + secret + "\"\n\n[[key]]\nname = \"b\"\nkey = \"" + secret + "\"\n",
        "[[key]]\nname = \"a\"\nkey = \"" + secret + "\"\nbogus = 1\n"}) {
    const std::string err = parse_error(text);
    ASSERT_FALSE(err.empty());
    EXPECT_EQ(err.find(secret), std::string::npos) << err;
  }
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

TEST(KeyStore, ReloadSwapsTheTableAndABadFileKeepsTheOld) {
  const std::string path = testing_support::temp_file("zl_keys_test", "reload.toml");
  write(path, "[[key]]\nname = \"a\"\nkey = \"ka\"\n[[key]]\nname = \"b\"\nkey = \"kb\"\n");
  auto store = KeyStore::open(path);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  std::shared_ptr<const KeyTable> before = (*store)->current();
  ASSERT_NE(before->find("ka"), nullptr);

  write(path, "[[key]]\nname = \"b\"\nkey = \"kb2\"\nrequests_per_minute = 5\n[[key]]\nname = \"c\"\nkey = \"kc\"\n");
  auto r = (*store)->reload();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->n_keys, 2u);
  EXPECT_EQ(r->n_added, 1u);    // c
  EXPECT_EQ(r->n_removed, 1u);  // a
  std::shared_ptr<const KeyTable> now = (*store)->current();
  EXPECT_EQ(now->find("ka"), nullptr);
  EXPECT_EQ(now->find("kb"), nullptr);  // b's key was rotated
  ASSERT_NE(now->find("kb2"), nullptr);
  EXPECT_EQ(now->find("kb2")->limits.requests_per_minute, 5);
  // Whoever held the old table still has it, unchanged (in-flight requests).
  EXPECT_NE(before->find("ka"), nullptr);

  write(path, "[[key]]\nname = \"d\"\nkey = \"kd\"\nmax_concurrent = -2\n");
  auto bad = (*store)->reload();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("keys file " + path + ", line 4:"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ((*store)->current(), now);  // the old table stays

  std::remove(path.c_str());
  auto gone = (*store)->reload();
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("cannot be read"), std::string::npos);
  EXPECT_EQ((*store)->current(), now);
}

TEST(KeyStore, OpenFailsOnAMissingOrBadFile) {
  EXPECT_FALSE(KeyStore::open(testing_support::temp_file("zl_keys_test", "none.toml")).ok());
  const std::string bad = testing_support::temp_file("zl_keys_test", "bad.toml");
  write(bad, "[[key]]\nname = \"a\"\n");
  auto s = KeyStore::open(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace zl::limits
