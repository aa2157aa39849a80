// deploy/k8s/: every YAML document parses (python3-yaml; SKIPPED without
// it), the kinds a deployment needs are there, and the manifests use the
// product's real names: the Deployment's flags are `zerolayer serve` flags,
// the ConfigMap's ZEROLAYER_* variables are serve settings, the probes hit
// /ready and /health, the grace period outlasts the drain timeout, and the
// HPA's metric is one the server exports on /metrics. Also the Dockerfile's
// essentials and the nginx config's syntax (nginx -t; SKIPPED without nginx).
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "cli/serve_config.h"
#include "support/http_client.h"
#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
const std::string kK8s = std::string(ZL_SOURCE_DIR) + "/deploy/k8s";

bool have_python_yaml() {
  static const bool have = std::system("python3 -c 'import yaml' >/dev/null 2>&1") == 0;
  return have;
}

// [{"file": name, "doc": document}, ...] for every document of every file.
json::array load_documents() {
  const std::string cmd =
      "cd " + kK8s +
      " && python3 -c 'import sys, json, yaml\n"
      "out = []\n"
      "for f in sorted(sys.argv[1:]):\n"
      "    for d in yaml.safe_load_all(open(f)):\n"
      "        if d is not None: out.append({\"file\": f, \"doc\": d})\n"
      "print(json.dumps(out))' *.yaml";
  CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return r.exit_code == 0 ? json::parse(r.out).as_array() : json::array{};
}

class K8s : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (have_python_yaml()) docs_ = load_documents();  // once: python3 starts slowly on a busy machine
  }
  void SetUp() override {
    if (!have_python_yaml()) GTEST_SKIP() << "SKIPPED: python3-yaml is not installed (apt-get install python3-yaml)";
    ASSERT_FALSE(docs_.empty());
  }
  static const json::object* find(const std::string& kind, const std::string& name = "") {
    for (const json::value& d : docs_) {
      const json::object& o = d.at("doc").as_object();
      if (o.at("kind").as_string() != kind) continue;
      if (!name.empty() && o.at("metadata").at("name").as_string() != name) continue;
      return &o;
    }
    return nullptr;
  }
  static inline json::array docs_;
};

TEST_F(K8s, EveryDocumentHasAKnownKindAndTheSetIsComplete) {
  std::map<std::string, int> kinds;
  for (const json::value& d : docs_) {
    const json::object& o = d.at("doc").as_object();
    ASSERT_TRUE(o.contains("apiVersion") && o.contains("kind")) << d.at("file").as_string();
    ++kinds[std::string(o.at("kind").as_string())];
    if (o.at("kind").as_string() != "Kustomization") {
      EXPECT_TRUE(o.at("metadata").as_object().contains("name"));
    }
  }
  for (const char* k : {"Namespace", "ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler",
                        "PodMonitor", "InferencePool", "Kustomization"}) {
    EXPECT_GE(kinds[k], 1) << k;
  }
  EXPECT_EQ(kinds["Deployment"], 2);  // zerolayer and its Redis
  // The kustomization lists every other file, and only existing ones.
  const json::object* kust = find("Kustomization");
  ASSERT_TRUE(kust);
  std::set<std::string> listed;
  for (const json::value& f : kust->at("resources").as_array()) {
    listed.insert(std::string(f.as_string()));
    EXPECT_TRUE(fs::exists(kK8s + "/" + std::string(f.as_string()))) << f;
  }
  for (const auto& e : fs::directory_iterator(kK8s)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".yaml" && name != "kustomization.yaml") {
      EXPECT_TRUE(listed.count(name)) << name;
    }
  }
}

TEST_F(K8s, DeploymentProbesDrainAndRealFlags) {
  const json::object* dep = find("Deployment", "zerolayer");
  ASSERT_TRUE(dep);
  const json::object& pod = dep->at("spec").at("template").at("spec").as_object();
  const json::object& c = pod.at("containers").at(0).as_object();
  EXPECT_EQ(c.at("readinessProbe").at("httpGet").at("path").as_string(), "/ready");
  EXPECT_EQ(c.at("livenessProbe").at("httpGet").at("path").as_string(), "/health");
  ASSERT_TRUE(c.contains("startupProbe"));
  const int64_t startup_budget_s = c.at("startupProbe").at("periodSeconds").as_int64() *
                                   c.at("startupProbe").at("failureThreshold").as_int64();
  EXPECT_GE(startup_budget_s, 120) << "model load";
  ASSERT_TRUE(c.at("lifecycle").at("preStop").as_object().contains("exec"));
  EXPECT_TRUE(c.at("resources").at("requests").as_object().contains("cpu"));
  EXPECT_TRUE(c.at("resources").at("requests").as_object().contains("memory"));
  EXPECT_TRUE(pod.at("securityContext").at("runAsNonRoot").as_bool());
  // The grace period outlasts preStop + the drain timeout of the ConfigMap.
  const json::object* cfg = find("ConfigMap", "zerolayer-config");
  ASSERT_TRUE(cfg);
  const int64_t drain_s = std::stoll(std::string(cfg->at("data").at("ZEROLAYER_DRAIN_TIMEOUT").as_string()));
  EXPECT_GT(pod.at("terminationGracePeriodSeconds").as_int64(), drain_s + 5);
  // Every flag is a serve flag; every ZEROLAYER_* variable a serve setting.
  const std::string help = run_command(std::string(ZL_BIN) + " serve --help").out;
  ASSERT_EQ(c.at("args").at(0).as_string(), "serve");
  for (const json::value& a : c.at("args").as_array()) {
    std::string flag(a.as_string());
    if (!flag.starts_with("--")) continue;
    flag = flag.substr(0, flag.find('='));
    EXPECT_NE(help.find(flag + " "), std::string::npos) << flag << " is not a serve flag";
  }
  std::set<std::string> env_names;
  for (const std::string& s : cli::serve_setting_names()) {
    std::string e = "ZEROLAYER_";
    for (char ch : s) e += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    env_names.insert(e);
  }
  for (const auto& [k, v] : cfg->at("data").as_object()) {
    EXPECT_TRUE(env_names.count(std::string(k))) << k << " is not a serve setting";
  }
  // The model comes from a volume mounted where --model points.
  bool model_mount = false;
  for (const json::value& m : c.at("volumeMounts").as_array()) model_mount |= m.at("mountPath").as_string() == "/models";
  EXPECT_TRUE(model_mount);
}

TEST_F(K8s, AutoscalerMetricIsExportedAndMonitorsScrapeIt) {
  const json::object* hpa = find("HorizontalPodAutoscaler");
  ASSERT_TRUE(hpa);
  const std::string metric(hpa->at("spec").at("metrics").at(0).at("pods").at("metric").at("name").as_string());
  ServerProcess s({"--fake-engine", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string text = fetch(s.port(), "GET", "/metrics").body;
  EXPECT_NE(text.find("\n" + metric + " "), std::string::npos) << metric << " is not on /metrics";
  const json::object* pm = find("PodMonitor");
  ASSERT_TRUE(pm);
  EXPECT_EQ(pm->at("spec").at("podMetricsEndpoints").at(0).at("path").as_string(), "/metrics");
  const json::object* pool = find("InferencePool");
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->at("spec").at("targetPorts").at(0).at("number").as_int64(), 8080);
}

TEST(DeployFiles, DockerfileAndNginxConfig) {
  const std::string docker = read_file(std::string(ZL_SOURCE_DIR) + "/deploy/Dockerfile");
  EXPECT_NE(docker.find("FROM debian:bookworm AS build"), std::string::npos);
  EXPECT_NE(docker.find("FROM debian:bookworm-slim"), std::string::npos);
  EXPECT_NE(docker.find("USER 10001"), std::string::npos);
  EXPECT_NE(docker.find("zerolayer-demo.gguf"), std::string::npos);
  if (std::system("command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx") != 0) {
    GTEST_SKIP() << "SKIPPED: nginx is not installed (apt-get install nginx-light)";
  }
  // The production config as shipped, in a scratch prefix (the listen port rewritten).
  const std::string dir = ::testing::TempDir() + "zl_nginx_t_" + std::to_string(getpid());
  fs::create_directories(dir);
  for (const char* f : {"nginx.conf", "zerolayer.conf", "replicas.conf", "canary.conf", "pins.conf"}) {
    fs::copy_file(std::string(ZL_SOURCE_DIR) + "/deploy/nginx/" + f, dir + "/" + f);
  }
  const std::string nginx = ::access("/usr/sbin/nginx", X_OK) == 0 ? "/usr/sbin/nginx" : "nginx";
  CommandResult r = run_command("cd " + dir + " && sed -i 's/listen 8080;/listen 127.0.0.1:1;/' zerolayer.conf && " +
                                nginx + " -t -p " + dir + " -c " + dir + "/nginx.conf -e " + dir + "/error.log 2>&1");
  EXPECT_NE(r.out.find("syntax is ok"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zl::test
