// The JSON logger (core/log.h): record shape, escaping, the text form, and
// whole lines from concurrent writers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

namespace zl {
namespace {

namespace json = boost::json;

// Captures what the logger writes into a temporary file.
class Capture {
 public:
  Capture() {
    file_ = std::tmpfile();
    previous_ = log::set_fd(fileno(file_));
  }
  ~Capture() {
    log::set_fd(previous_);
    std::fclose(file_);
  }
  std::vector<std::string> lines() {
    std::fflush(file_);
    std::string all;
    char buf[4096];
    off_t off = 0;
    ssize_t n;
    while ((n = pread(fileno(file_), buf, sizeof buf, off)) > 0) {
      all.append(buf, static_cast<size_t>(n));
      off += n;
    }
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < all.size()) {
      const size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) {
        out.push_back(all.substr(pos));  // a line without its newline: a failure for the caller
        break;
      }
      out.push_back(all.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return out;
  }

 private:
  std::FILE* file_ = nullptr;
  int previous_ = -1;
};

TEST(Log, JsonRecordHasTsLevelMsgAndFields) {
  const std::string line = log::format_record(log::Format::kJson, log::Level::kWarn, "drain timeout",
                                              {{"request_id", "req_1"}, {"n", 3}, {"t_ms", 1.5}, {"ok", true},
                                               {"size", size_t{7}}});
  json::object o = json::parse(line).as_object();
  EXPECT_EQ(o.at("level").as_string(), "warn");
  EXPECT_EQ(o.at("msg").as_string(), "drain timeout");
  EXPECT_EQ(o.at("request_id").as_string(), "req_1");
  EXPECT_EQ(o.at("n").as_int64(), 3);
  EXPECT_DOUBLE_EQ(o.at("t_ms").as_double(), 1.5);
  EXPECT_TRUE(o.at("ok").as_bool());
  EXPECT_EQ(o.at("size").as_int64(), 7);
  // RFC 3339 UTC with milliseconds: 2026-12-01T15:08:19.123Z
  const std::string ts(o.at("ts").as_string());
  ASSERT_EQ(ts.size(), 24u) << ts;
  EXPECT_EQ(ts[4], '-');
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts[19], '.');
  EXPECT_EQ(ts.back(), 'Z');
  // Key order: ts, level, msg, then the fields as given.
  EXPECT_LT(line.find("\"ts\""), line.find("\"level\""));
  EXPECT_LT(line.find("\"level\""), line.find("\"msg\""));
  EXPECT_LT(line.find("\"msg\""), line.find("\"request_id\""));
}

TEST(Log, HostileStringsStayOneValidJsonLine) {
  // A newline, a quote, control bytes and invalid UTF-8 cannot break the
  // record or forge a field.
  const std::string evil = "a\"b\n{\"level\":\"fatal\"}\x01\x7f \xff\xc3(\xe2\x82 ok \xc3\xa9 \xf0\x9f\x99\x82";
  const std::string line = log::format_record(log::Format::kJson, log::Level::kInfo, evil, {{"path", evil}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  json::object o = json::parse(line).as_object();
  EXPECT_EQ(o.at("level").as_string(), "info");
  const std::string msg(o.at("msg").as_string());
  EXPECT_EQ(msg, std::string(o.at("path").as_string()));
  EXPECT_NE(msg.find("a\"b\n{"), std::string::npos);
  EXPECT_NE(msg.find("\xc3\xa9"), std::string::npos);          // valid UTF-8 kept as is
  EXPECT_NE(msg.find("\xf0\x9f\x99\x82"), std::string::npos);
  EXPECT_NE(msg.find("\xef\xbf\xbd"), std::string::npos);      // invalid bytes became U+FFFD
  EXPECT_EQ(msg.find('\xff'), std::string::npos);
}

TEST(Log, TextFormatForHumans) {
  const std::string line = log::format_record(log::Format::kText, log::Level::kError, "handler threw\nnext",
                                              {{"request_id", "req_9"}, {"what", "bad thing"}, {"n", -2}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find(" ERROR handler threw next request_id=req_9 what=\"bad thing\" n=-2"), std::string::npos) << line;
  EXPECT_EQ(line[23], 'Z');
}

TEST(Log, LevelsBelowTheMinimumAreDropped) {
  Capture cap;
  const log::Format before = log::format();
  log::set_format(log::Format::kJson);
  log::debug("not shown");
  log::info("shown", {{"k", 1}});
  log::set_min_level(log::Level::kError);
  log::warn("not shown either");
  log::error("shown too");
  log::set_min_level(log::Level::kInfo);
  log::set_format(before);
  const std::vector<std::string> lines = cap.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0]).as_object().at("msg").as_string(), "shown");
  EXPECT_EQ(json::parse(lines[1]).as_object().at("level").as_string(), "error");
}

TEST(Log, ConcurrentLinesNeverInterleave) {
  Capture cap;
  const log::Format before = log::format();
  log::set_format(log::Format::kJson);
  constexpr int kThreads = 8;
  constexpr int kLines = 300;
  // Long lines (past a pipe's atomic size) make interleaving likely if
  // writes were not whole.
  const std::string payload(6000, 'x');
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLines; ++i) log::info("line", {{"thread", t}, {"i", i}, {"payload", payload}});
    });
  }
  for (auto& th : threads) th.join();
  log::set_format(before);
  const std::vector<std::string> lines = cap.lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLines));
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    json::object o = json::parse(line).as_object();
    const int t = static_cast<int>(o.at("thread").as_int64());
    // Each thread's lines in its own order.
    EXPECT_EQ(o.at("i").as_int64(), next[t]++);
    EXPECT_EQ(o.at("payload").as_string().size(), payload.size());
  }
}

}  // namespace
}  // namespace zl
