// The loopback fleet (deploy/local-fleet.sh, deploy/nginx/zerolayer.conf):
// redis-server, three `zerolayer_test_server serve --fake-engine` replicas
// sharing the --keys quotas through Redis, and nginx in front. Checks that
// sessions spread over the replicas and each sticks to one, that
// X-Engine-Host pins (503 Anthropic envelope once that replica is down),
// that a quota holds across replicas, and that a replica killed under load
// loses no request that had not started streaming (nginx retries what never
// reached a replica). SKIPPED where nginx, redis-server or curl is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/ports.h"
#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;

const std::string kScript = std::string(ZL_SOURCE_DIR) + "/deploy/local-fleet.sh";

std::string missing_program() {
  for (auto [prog, pkg] : {std::pair{"nginx", "nginx-light"}, {"redis-server", "redis-server"}, {"curl", "curl"}}) {
    const std::string cmd = std::string("command -v ") + prog + " >/dev/null 2>&1 || test -x /usr/sbin/" + prog;
    if (std::system(cmd.c_str()) != 0) return std::string(prog) + " (Debian package " + pkg + ")";
  }
  return "";
}

std::string body(int max_tokens, bool stream, const std::string& content = "hi") {
  return json::serialize(json::object{
      {"model", "m"}, {"max_tokens", max_tokens}, {"stream", stream},
      {"messages", json::array{json::object{{"role", "user"}, {"content", content}}}}});
}

class Fleet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = missing_program();
    if (!skip_.empty()) return;
    state_ = ::testing::TempDir() + "zl_fleet_" + std::to_string(getpid());
    std::filesystem::create_directories(state_ + "-conf");
    keys_ = state_ + "-conf/keys.toml";
    std::ofstream(keys_) << "[[key]]\nname = \"open\"\nkey = \"sk-open\"\n\n"
                            "[[key]]\nname = \"tight\"\nkey = \"sk-tight\"\nrequests_per_minute = 4\n";
    port_ = free_loopback_port();
    CommandResult r = fleet("up --replicas 3 --port " + std::to_string(port_) + " --model /dev/null --keys " + keys_ +
                            " --zerolayer " + ZL_TEST_SERVER + " -- --fake-engine --request-log false");
    up_ = r.exit_code == 0 && r.out.find("http://127.0.0.1:" + std::to_string(port_)) != std::string::npos;
    if (!up_) std::fprintf(stderr, "local-fleet up failed (%d):\n%s\n", r.exit_code, r.out.c_str());
  }
  static void TearDownTestSuite() {
    if (!state_.empty()) fleet("down");
    std::error_code ec;
    std::filesystem::remove_all(state_ + "-conf", ec);
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "SKIPPED: " << skip_ << " is not installed";
    ASSERT_TRUE(up_) << "the fleet did not start";
  }
  static CommandResult fleet(const std::string& args) {
    return run_command("ZL_FLEET_DIR=" + state_ + " timeout 90 " + kScript + " " + args + " 2>&1");
  }
  // A Messages request through nginx; the replica that answered is x-engine-host.
  static HttpReply post(const std::string& key, const std::string& session, int max_tokens = 4,
                        std::vector<std::string> more = {}) {
    std::vector<std::string> h = {"x-api-key: " + key};
    if (!session.empty()) h.push_back("x-claude-code-session-id: " + session);
    h.insert(h.end(), more.begin(), more.end());
    return fetch(port_, "POST", "/v1/messages", body(max_tokens, false), h);
  }

  void SessionsSpreadAndEachSticksToOneReplica();
  void EngineHostHeaderPins();
  void QuotaHoldsAcrossReplicas();
  void ReplicaKilledUnderLoadLosesNoRequestThatHadNotStarted();

  static inline std::string skip_, state_, keys_;
  static inline int port_ = 0;
  static inline bool up_ = false;
};

void Fleet::SessionsSpreadAndEachSticksToOneReplica() {
  std::set<std::string> hosts;
  for (int s = 0; s < 12; ++s) {
    const std::string session = "session-" + std::to_string(s);
    std::string first;
    for (int rep = 0; rep < 3; ++rep) {
      HttpReply r = post("sk-open", session);
      ASSERT_EQ(r.status, 200) << r.body;
      const std::string host = r.header("x-engine-host");
      ASSERT_TRUE(host.starts_with("replica-")) << host;
      if (rep == 0) first = host;
      EXPECT_EQ(host, first) << session << " moved";
    }
    hosts.insert(first);
  }
  EXPECT_GE(hosts.size(), 2u) << "12 sessions all on one replica";
  // No session id: the API key is the affinity key.
  const std::string by_key = post("sk-open", "").header("x-engine-host");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(post("sk-open", "").header("x-engine-host"), by_key);
}

void Fleet::EngineHostHeaderPins() {
  for (int n = 1; n <= 3; ++n) {
    const std::string name = "replica-" + std::to_string(n);
    for (const char* header : {"X-Engine-Host: ", "X-Anthropic-Engine-Host: "}) {
      HttpReply r = post("sk-open", "pinned-session", 4, {header + name});
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.header("x-engine-host"), name);
    }
    HttpReply ready = fetch(port_, "GET", "/ready", "", {"X-Engine-Host: " + name});
    EXPECT_EQ(json::parse(ready.body).at("host").as_string(), name);
  }
  HttpReply unknown = post("sk-open", "", 4, {"X-Engine-Host: replica-99"});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(json::parse(unknown.body).at("error").at("type").as_string(), "not_found_error");
}

void Fleet::QuotaHoldsAcrossReplicas() {
  std::map<int, int> by_status;
  std::set<std::string> served_by;
  for (int i = 0; i < 8; ++i) {
    // Pinned round-robin: the consistent hash of a few sessions may put them
    // all on one replica (it depends on the replicas' ports).
    HttpReply r = post("sk-tight", "quota-session-" + std::to_string(i), 4,
                       {"X-Engine-Host: replica-" + std::to_string(i % 3 + 1)});
    ++by_status[r.status];
    if (r.status == 200) served_by.insert(r.header("x-engine-host"));
  }
  // 4 requests a minute for the key, whichever replica counts them.
  EXPECT_EQ(by_status[200], 4);
  EXPECT_EQ(by_status[429], 4);
  EXPECT_GE(served_by.size(), 2u) << "the admitted requests all went to one replica: sharing not exercised";
}

// Kills replica-2: runs last.
void Fleet::ReplicaKilledUnderLoadLosesNoRequestThatHadNotStarted() {
  // Sessions by replica (consistent hashing is deterministic).
  std::map<std::string, std::vector<std::string>> sessions;
  for (int s = 0; s < 40; ++s) {
    const std::string session = "load-" + std::to_string(s);
    sessions[post("sk-open", session, 1).header("x-engine-host")].push_back(session);
  }
  ASSERT_GE(sessions["replica-2"].size(), 2u);
  // The load: long streams on every replica, each past its head.
  struct Stream {
    std::unique_ptr<RawClient> client;
    std::string host;
  };
  std::vector<Stream> streams;
  for (const auto& [host, list] : sessions) {
    for (size_t i = 0; i < std::min<size_t>(2, list.size()); ++i) {
      auto c = std::make_unique<RawClient>(port_);
      ASSERT_TRUE(c->connected());
      c->send_raw(http_request("POST", "/v1/messages", body(400, true, "[[fake:long]] go"),
                               {"x-api-key: sk-open", "x-claude-code-session-id: " + list[i]}));
      ASSERT_TRUE(c->read_until([](const std::string& b) { return b.find("content_block_delta") != std::string::npos; }))
          << host;
      streams.push_back({std::move(c), host});
    }
  }
  CommandResult k = fleet("kill replica-2");
  ASSERT_EQ(k.exit_code, 0) << k.out;
  // Right after the kill, requests of the sessions that hashed to replica-2
  // (and the others): none had reached a replica, so none may be lost.
  int n_ok = 0;
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& [host, list] : sessions) {
      for (const std::string& session : list) {
        HttpReply r = post("sk-open", session, 2);
        EXPECT_EQ(r.status, 200) << session << " (was on " << host << "): " << r.body;
        EXPECT_NE(r.header("x-engine-host"), "replica-2");
        n_ok += r.status == 200;
      }
    }
  }
  EXPECT_EQ(n_ok, 80);
  // Streams on the surviving replicas finish normally; those on replica-2
  // had started streaming and are cut.
  for (Stream& s : streams) {
    HttpReply r = s.client->read_response(15000);
    if (s.host == "replica-2") {
      EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
    } else {
      EXPECT_TRUE(r.complete) << s.host;
      EXPECT_NE(r.body.find("event: message_stop"), std::string::npos) << s.host;
    }
  }
  // Pinned to the dead replica: 503 with the Anthropic envelope.
  HttpReply pinned = post("sk-open", "", 2, {"X-Engine-Host: replica-2"});
  EXPECT_EQ(pinned.status, 503);
  const json::value e = json::parse(pinned.body);
  EXPECT_EQ(e.at("type").as_string(), "error");
  EXPECT_EQ(e.at("error").at("type").as_string(), "api_error");
  EXPECT_EQ(e.at("error").at("detail").at("engine_host").as_string(), "replica-2");
}

// One fleet for all the checks (a fleet takes seconds to start and stop on
// a busy machine; ctest runs each TEST in a process of its own).
TEST_F(Fleet, NginxRedisAndThreeReplicas) {
  SessionsSpreadAndEachSticksToOneReplica();
  if (HasFatalFailure()) return;
  EngineHostHeaderPins();
  if (HasFatalFailure()) return;
  QuotaHoldsAcrossReplicas();
  if (HasFatalFailure()) return;
  ReplicaKilledUnderLoadLosesNoRequestThatHadNotStarted();
  if (HasFatalFailure()) return;
}

}  // namespace
}  // namespace zl::test
