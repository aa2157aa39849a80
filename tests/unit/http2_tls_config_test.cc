// The HTTP/2 and TLS settings (flag, env, TOML), the TLS context's errors,
// and the h2c upgrade header's decoding. The protocols themselves are tested
// end to end with real clients in tests/e2e/http2_test.cc.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "cli/serve_config.h"
#include "http/http2_session.h"
#include "http/tls.h"

namespace zl {
namespace {

TEST(Http2TlsConfig, FlagEnvTomlAndErrors) {
  const std::string path = ::testing::TempDir() + "http2_tls_config_test.toml";
  {
    std::ofstream f(path);
    f << "tls_cert = \"/etc/zl/cert.pem\"\ntls_key = \"/etc/zl/key.pem\"\nh2_max_concurrent_streams = 32\n";
  }
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto d = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tls_cert, "");
  EXPECT_EQ(d->h2_max_concurrent_streams, 128);
  EXPECT_EQ(d->h2_max_resets_per_s, 100);
  EXPECT_EQ(d->max_header_bytes, 65536);
  auto c = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->tls_cert, "/etc/zl/cert.pem");
  EXPECT_EQ(c->tls_key, "/etc/zl/key.pem");
  EXPECT_EQ(c->h2_max_concurrent_streams, 32);
  env["ZEROLAYER_H2_MAX_CONCURRENT_STREAMS"] = "64";
  env["ZEROLAYER_H2_MAX_RESETS_PER_S"] = "20";
  c = cli::resolve_serve_config({{"config", path}, {"max-header-bytes", "8192"}}, {}, getenv);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->h2_max_concurrent_streams, 64);  // env over TOML
  EXPECT_EQ(c->h2_max_resets_per_s, 20);
  EXPECT_EQ(c->max_header_bytes, 8192);
  // A certificate without its key (or the reverse) is a usage error naming the source.
  auto bad = cli::resolve_serve_config({{"tls-cert", "c.pem"}}, {}, [](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tls-cert"), std::string::npos) << bad.status().message();
  bad = cli::resolve_serve_config({{"h2-max-concurrent-streams", "0"}}, {},
                                  [](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--h2-max-concurrent-streams"), std::string::npos);
}

TEST(Http2TlsConfig, TlsContextErrorsNameTheFile) {
  auto missing = http::internal::make_tls_context("/nonexistent/cert.pem", "/nonexistent/key.pem");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/cert.pem"), std::string::npos);
  const std::string junk = ::testing::TempDir() + "http2_tls_junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  auto bad = http::internal::make_tls_context(junk, junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(junk), std::string::npos);
}

http::HttpRequest upgrade_request(std::string upgrade, std::string settings) {
  http::HttpRequest r;
  r.method = "GET";
  r.version = 11;
  r.headers = {{"connection", "Upgrade, HTTP2-Settings"}, {"upgrade", std::move(upgrade)},
               {"http2-settings", std::move(settings)}};
  return r;
}

TEST(Http2TlsConfig, H2cUpgradeSettings) {
  // SETTINGS_MAX_CONCURRENT_STREAMS (3) = 100, SETTINGS_INITIAL_WINDOW_SIZE (4) = 33554432, base64url.
  auto s = http::internal::h2c_upgrade_settings(upgrade_request("h2c", "AAMAAABkAAQCAAAA"));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, std::string("\x00\x03\x00\x00\x00\x64\x00\x04\x02\x00\x00\x00", 12));
  EXPECT_TRUE(http::internal::h2c_upgrade_settings(upgrade_request("websocket, H2C", "")).has_value());
  EXPECT_FALSE(http::internal::h2c_upgrade_settings(upgrade_request("websocket", "AAMAAABk")).has_value());
  EXPECT_FALSE(http::internal::h2c_upgrade_settings(upgrade_request("h2c", "AAM+AABk")).has_value());  // not base64url
  http::HttpRequest no_settings = upgrade_request("h2c", "");
  no_settings.headers.pop_back();
  EXPECT_FALSE(http::internal::h2c_upgrade_settings(no_settings).has_value());
}

}  // namespace
}  // namespace zl
