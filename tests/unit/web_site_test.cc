// The embedded web playground (web/site.h) and its routes (api/web_routes.cc):
// every file the page names is embedded, browsers get the page at / and the
// others the banner, caching (ETag, 304, immutable names), the security
// headers, 404 for an unknown file, --ui false, and no auth on the page
// while the API keeps its key.
#include <gtest/gtest.h>

#include <regex>

#include "cli/serve_config.h"
#include "support/fake_api_server.h"
#include "support/http_client.h"
#include "web/site.h"

namespace zl::web {
namespace {

std::string header(const http::HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(WebSite, ThePageNamesOnlyEmbeddedFilesWithHashedNames) {
  const Asset& index = index_page();
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  std::string html(index.body);
  std::regex ref(R"re((?:src|href)="/ui/([^"]+)")re");
  int n = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it, ++n) {
    const std::string name = (*it)[1];
    EXPECT_TRUE(std::regex_match(name, std::regex(R"(app\.[0-9a-f]{12}\.(js|css))"))) << name;
    const Asset* a = find_asset(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->content_type, name.ends_with(".js") ? "text/javascript; charset=utf-8" : "text/css; charset=utf-8");
  }
  EXPECT_EQ(n, 2);  // one script, one style sheet
  // Nothing from elsewhere: no scheme-qualified or protocol-relative URL.
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("=\"//"), std::string::npos);
  size_t total = 0;
  for (const Asset& a : embedded_assets()) total += a.body.size();
  EXPECT_LT(total, 400u * 1024);
}

TEST(WebSite, WantsHtml) {
  EXPECT_TRUE(wants_html("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"));
  EXPECT_TRUE(wants_html("text/html"));
  EXPECT_FALSE(wants_html("*/*"));  // curl
  EXPECT_FALSE(wants_html(""));
  EXPECT_FALSE(wants_html("application/json"));
  EXPECT_FALSE(wants_html("text/html;q=0, */*"));
}

TEST(WebSite, CachingAndSecurityHeaders) {
  const Asset& index = index_page();
  http::HttpResponse r = asset_response(index, "", /*immutable=*/false);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, index.body);
  EXPECT_EQ(header(r, "Cache-Control"), "no-cache");
  EXPECT_EQ(header(r, "ETag"), index.etag);
  EXPECT_NE(header(r, "Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  EXPECT_NE(header(r, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(header(r, "Content-Security-Policy").find("unsafe"), std::string::npos);
  EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
  const std::string etag(index.etag);
  for (const std::string& inm : {etag, "W/" + etag, "\"other\", " + etag, std::string("*")}) {
    http::HttpResponse nm = asset_response(index, inm, false);
    EXPECT_EQ(nm.status, 304) << inm;
    EXPECT_TRUE(nm.body.empty());
    EXPECT_EQ(header(nm, "ETag"), index.etag);
  }
  EXPECT_EQ(asset_response(index, "\"other\"", false).status, 200);
  for (const Asset& a : embedded_assets()) {
    if (a.name == "index.html") continue;
    EXPECT_EQ(header(asset_response(a, "", true), "Cache-Control"), "public, max-age=31536000, immutable");
  }
}

class WebRoutes : public ::testing::Test {
 protected:
  void start(bool ui) {
    api::ApiConfig cfg;
    cfg.api_keys = {"k"};
    cfg.ui = ui;
    server_ = std::make_unique<test::FakeApiServer>(fake::FakeEngineConfig{}, cfg, http::ServerConfig{});
    ASSERT_TRUE(server_->listening());
  }
  test::HttpReply get(const std::string& target, std::vector<std::string> headers = {}) {
    return test::fetch(server_->port(), "GET", target, "", headers);
  }
  std::unique_ptr<test::FakeApiServer> server_;
};

TEST_F(WebRoutes, BrowsersGetThePageOthersTheBanner) {
  start(true);
  test::HttpReply plain = get("/");
  EXPECT_EQ(plain.status, 200);
  EXPECT_EQ(plain.body, "zerolayer\n");
  EXPECT_EQ(plain.header("vary"), "Accept");
  test::HttpReply page = get("/", {"Accept: text/html,*/*;q=0.8"});  // no key: the page is open
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(page.body, index_page().body);
  EXPECT_EQ(page.header("vary"), "Accept");
  EXPECT_EQ(get("/", {"Accept: text/html", "If-None-Match: " + page.header("etag")}).status, 304);
  test::HttpReply head = test::fetch(server_->port(), "HEAD", "/", "", {"Accept: text/html"});
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());

  for (const Asset& a : embedded_assets()) {
    if (a.name == "index.html") continue;
    test::HttpReply r = get("/ui/" + std::string(a.name));
    EXPECT_EQ(r.status, 200) << a.name;
    EXPECT_EQ(r.body, a.body);
    EXPECT_EQ(r.header("content-type"), a.content_type);
    EXPECT_EQ(r.header("cache-control"), "public, max-age=31536000, immutable");
  }
  test::HttpReply missing = get("/ui/app.000000000000.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("not_found_error"), std::string::npos);
  EXPECT_EQ(get("/ui/index.html").status, 404);  // the page lives at / only
  EXPECT_EQ(get("/ui/../health").status, 404);
  // The API still wants its key.
  EXPECT_EQ(test::fetch(server_->port(), "POST", "/v1/messages", R"({"model":"m","max_tokens":1,"messages":[]})").status, 401);
}

TEST_F(WebRoutes, UiFalseServesTheBannerOnly) {
  start(false);
  test::HttpReply r = get("/", {"Accept: text/html"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "zerolayer\n");
  EXPECT_EQ(r.header("vary"), "");
  EXPECT_EQ(get("/ui/" + std::string(embedded_assets().front().name)).status, 404);  // app.<hash>.css
}

TEST(WebSetting, UiFlagEnvAndDefault) {
  auto no_env = [](const char*) -> const char* { return nullptr; };
  auto ui_off_env = [](const char* name) -> const char* { return std::string_view(name) == "ZEROLAYER_UI" ? "false" : nullptr; };
  EXPECT_TRUE(cli::resolve_serve_config({}, {}, no_env).value().ui);
  EXPECT_FALSE(cli::resolve_serve_config({{"ui", "false"}}, {}, no_env).value().ui);
  EXPECT_FALSE(cli::resolve_serve_config({}, {}, ui_off_env).value().ui);
  EXPECT_TRUE(cli::resolve_serve_config({{"ui", "true"}}, {}, ui_off_env).value().ui);  // the flag wins
  EXPECT_FALSE(cli::resolve_serve_config({{"ui", "maybe"}}, {}, no_env).ok());
}

}  // namespace
}  // namespace zl::web
