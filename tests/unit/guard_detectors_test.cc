// guard/detectors: each PII detector on positives (with separators,
// full-width forms, zero-width characters) and near misses that must pass
// untouched; the validation primitives (Luhn, mod-97, SSN rules) on
// published examples.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "guard/detectors.h"
#include "guard/guard.h"

namespace zl::guard {
namespace {

std::shared_ptr<const Guard> pii_guard() {
  static const auto g = [] {
    Policy p;
    p.rules.push_back({.name = "pii",
                       .pii = {PiiKind::kEmail, PiiKind::kPhone, PiiKind::kCreditCard, PiiKind::kIban,
                               PiiKind::kUsSsn, PiiKind::kApiKey},
                       .input = InputAction::kRedact,
                       .output = OutputAction::kRedact});
    return Guard::compile(std::move(p)).value();
  }();
  return g;
}

// "kind:matched text" for every match.
std::vector<std::string> found(std::string_view text) {
  std::vector<std::string> out;
  for (const Match& m : pii_guard()->scan(text)) {
    out.push_back(std::string(pii_guard()->kind_name(m)) + ":" + std::string(text.substr(m.start, m.end - m.start)));
  }
  return out;
}

using V = std::vector<std::string>;

TEST(GuardDetectors, Email) {
  EXPECT_EQ(found("mail john.doe+tag@example.co.uk now"), V{"email:john.doe+tag@example.co.uk"});
  EXPECT_EQ(found("Write to a_b@sub.example.org."), V{"email:a_b@sub.example.org"});
  EXPECT_EQ(found("JOHN@EXAMPLE.COM"), V{"email:JOHN@EXAMPLE.COM"});
  EXPECT_EQ(found("x＠example.com"), V{"email:x＠example.com"});  // full-width at sign
  EXPECT_EQ(found("jo\u200Bhn@exam\u200Bple.com"), V{"email:jo\u200Bhn@exam\u200Bple.com"});
  EXPECT_EQ(found("reach m.m\u00FCller@example.de now"), V{"email:m.m\u00FCller@example.de"});
  EXPECT_EQ(found("user@b\u00FCcher.de"), V{"email:user@b\u00FCcher.de"});
  EXPECT_EQ(found("name at example dot com"), V{});
  EXPECT_EQ(found("user@localhost"), V{});
  EXPECT_EQ(found("a..b@example.com"), V{});
  EXPECT_EQ(found("@example.com"), V{});
  EXPECT_EQ(found("x@example.c0m"), V{});
}

TEST(GuardDetectors, Phone) {
  EXPECT_EQ(found("call (415) 555-2671 today"), V{"phone:(415) 555-2671"});
  EXPECT_EQ(found("call 415.555.2671"), V{"phone:415.555.2671"});
  EXPECT_EQ(found("call +1 415 555 2671"), V{"phone:+1 415 555 2671"});
  EXPECT_EQ(found("call 1-415-555-2671"), V{"phone:1-415-555-2671"});
  EXPECT_EQ(found("+14155552671"), V{"phone:+14155552671"});
  EXPECT_EQ(found("London +44 20 7946 0958."), V{"phone:+44 20 7946 0958"});
  EXPECT_EQ(found("Paris +33 (0)1 42 68 53 00"), V{"phone:+33 (0)1 42 68 53 00"});
  EXPECT_EQ(found("+49-30-901820"), V{"phone:+49-30-901820"});
  // Near misses: versions, dates, area codes starting with 0/1, too few digits.
  EXPECT_EQ(found("version 1.2.3"), V{});
  EXPECT_EQ(found("on 2024-01-15"), V{});
  EXPECT_EQ(found("call 015-555-2671"), V{});
  EXPECT_EQ(found("ext 555-2671"), V{});
  EXPECT_EQ(found("+12 34"), V{});
  EXPECT_EQ(found("id 4155552671"), V{});  // bare ten digits: too many false positives
}

TEST(GuardDetectors, CreditCard) {
  EXPECT_EQ(found("card 4111 1111 1111 1111 ok"), V{"credit_card:4111 1111 1111 1111"});
  EXPECT_EQ(found("card 4111-1111-1111-1111"), V{"credit_card:4111-1111-1111-1111"});
  EXPECT_EQ(found("5500005555555559"), V{"credit_card:5500005555555559"});
  EXPECT_EQ(found("amex 3782 822463 10005"), V{"credit_card:3782 822463 10005"});
  EXPECT_EQ(found("４１１１ １１１１ １１１１ １１１１"), V{"credit_card:４１１１ １１１１ １１１１ １１１１"});
  EXPECT_EQ(found("4111 1111 1111 1112"), V{});  // Luhn fails
  EXPECT_EQ(found("4111111111111111111111"), V{});  // 22 digits: not a card
  EXPECT_EQ(found("0000 0000 0000 0000"), V{});
  EXPECT_EQ(found("order 1234567890123456"), V{});
}

TEST(GuardDetectors, Iban) {
  EXPECT_EQ(found("IBAN DE89 3704 0044 0532 0130 00 please"), V{"iban:DE89 3704 0044 0532 0130 00"});
  EXPECT_EQ(found("GB82WEST12345698765432"), V{"iban:GB82WEST12345698765432"});
  EXPECT_EQ(found("FR14 2004 1010 0505 0001 3M02 606"), V{"iban:FR14 2004 1010 0505 0001 3M02 606"});
  EXPECT_EQ(found("DE89 3704 0044 0532 0130 01"), V{});  // mod-97 fails
  EXPECT_EQ(found("DE89 3704 0044 0532 0130"), V{});     // wrong length for DE
  EXPECT_EQ(found("AB12 hello world"), V{});
}

TEST(GuardDetectors, UsSsn) {
  EXPECT_EQ(found("ssn 123-45-6789."), V{"us_ssn:123-45-6789"});
  EXPECT_EQ(found("ssn 123 45 6789"), V{"us_ssn:123 45 6789"});
  EXPECT_EQ(found("000-12-3456"), V{});
  EXPECT_EQ(found("666-12-3456"), V{});
  EXPECT_EQ(found("912-12-3456"), V{});
  EXPECT_EQ(found("123-00-4567"), V{});
  EXPECT_EQ(found("123-45-0000"), V{});
  EXPECT_EQ(found("123-45-67890"), V{});
  EXPECT_EQ(found("123-45 6789"), V{});  // mixed separators
}

TEST(GuardDetectors, ApiKey) {
  const std::string openai = "sk-proj-4fR9xQ2mZ7pL1vB8nK3tY6wH0sD5gJ";
  EXPECT_EQ(found("key=" + openai + " end"), V{"api_key:" + openai});
  const std::string ant = "sk-ant-api03-Xb7Yq2Lp9Rt4Mz8Kw1Vn6Hs3Jd5Fg0Ac";
  EXPECT_EQ(found(ant), V{"api_key:" + ant});
  EXPECT_EQ(found("AKIAIOSFODNN7EXAMPLE"), V{"api_key:AKIAIOSFODNN7EXAMPLE"});
  EXPECT_EQ(found("ghp_1234567890abcdefghijklmnopqrstuvwxyZ"), V{"api_key:ghp_1234567890abcdefghijklmnopqrstuvwxyZ"});
  EXPECT_EQ(found("sk-short"), V{});
  EXPECT_EQ(found("sk-this-is-not-a-real-key-at-all"), V{});
  EXPECT_EQ(found("akiaiosfodnn7example"), V{});  // AWS key ids are upper case
  EXPECT_EQ(found("AKIAIOSFODNN7EXAMPL"), V{});   // 19 characters
  EXPECT_EQ(found("ghp_123"), V{});
  EXPECT_EQ(found("task-ant-api03-Xb7Yq2Lp9Rt4Mz8Kw1Vn6Hs3Jd5Fg0Ac"), V{});  // not at a word start
}

TEST(GuardDetectors, Validators) {
  EXPECT_TRUE(detect::luhn_ok("79927398713"));
  EXPECT_FALSE(detect::luhn_ok("79927398710"));
  EXPECT_TRUE(detect::iban_ok("GB82WEST12345698765432"));
  EXPECT_TRUE(detect::iban_ok("gb82west12345698765432"));
  EXPECT_FALSE(detect::iban_ok("GB82WEST12345698765433"));
  EXPECT_TRUE(detect::ssn_ok("123", "45", "6789"));
  EXPECT_FALSE(detect::ssn_ok("900", "45", "6789"));
}

}  // namespace
}  // namespace zl::guard
