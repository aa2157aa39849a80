// A real redis-server for tests (Debian's redis-server package): started on a
// free loopback port in a temp dir with persistence off (--save "",
// --appendonly no), stopped by pid, never outliving the test process.
//
//   RedisServer redis;
//   if (!redis.start()) GTEST_SKIP() << RedisServer::skip_reason();
//   ... redis.url() ... redis.kill(); ... redis.start();  // again, same port
//
// start() waits (bounded, 10 s) until the server answers PING; a missing
// binary makes start() false with available() false (the tests then skip).
// client() opens a separate hiredis connection for inspecting keys.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/wait.h"

namespace zl::test {

class RedisServer {
 public:
  struct ClientDeleter {
    void operator()(redisContext* c) const { redisFree(c); }
  };
  using Client = std::unique_ptr<redisContext, ClientDeleter>;

  // The binary: $ZL_REDIS_SERVER, else redis-server in /usr/bin or /usr/local/bin.
  static std::string binary() {
    if (const char* e = std::getenv("ZL_REDIS_SERVER"); e && *e) return e;
    for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
      if (::access(p, X_OK) == 0) return p;
    }
    return "";
  }
  static bool available() { return !binary().empty(); }
  static std::string skip_reason() { return "SKIPPED: redis-server is not installed (apt-get install redis-server)"; }

  // A loopback port that was free a moment ago (the kernel's pick).
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  RedisServer() = default;
  ~RedisServer() {
    kill();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts the server (on the same port as before after a kill()); true once
  // it answers PING.
  bool start() {
    if (pid_ > 0) return true;
    const std::string bin = binary();
    if (bin.empty()) return false;
    if (dir_.empty()) {
      std::string tmpl = ::testing::TempDir() + "zl_redis_XXXXXX";
      if (!::mkdtemp(tmpl.data())) return false;
      dir_ = tmpl;
    }
    if (port_ == 0) port_ = free_port();
    const std::vector<std::string> args = {bin,         "--port",       std::to_string(port_), "--bind",
                                           "127.0.0.1", "--save",       "",                    "--appendonly",
                                           "no",        "--dir",        dir_,                  "--logfile",
                                           dir_ + "/redis.log", "--daemonize", "no",           "--protected-mode",
                                           "no"};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (pid_ < 0) return false;
    const bool up = wait_until([this] { return ping(); }, std::chrono::seconds(10), std::chrono::milliseconds(5));
    if (!up) kill();
    return up;
  }

  // SIGKILL (a crash, no shutdown) and reap. The port stays reserved for start().
  void kill() { signal_and_reap(SIGKILL); }
  // Freezes / thaws the server: its clients time out while it is stopped.
  void pause() const {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void resume() const {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url(int db = -1) const {
    return "redis://127.0.0.1:" + std::to_string(port_) + (db >= 0 ? "/" + std::to_string(db) : "");
  }

  // A fresh connection (1 s timeouts), or null.
  Client client(int db = 0) const {
    timeval tv{1, 0};
    Client c(redisConnectWithTimeout("127.0.0.1", port_, tv));
    if (!c || c->err) return nullptr;
    redisSetTimeout(c.get(), tv);
    if (db != 0 && !command_ok(c.get(), "SELECT " + std::to_string(db))) return nullptr;
    return c;
  }
  // The reply to a one-word-argument command as text ("" on failure;
  // integers as decimal, nil as "(nil)").
  static std::string command(redisContext* c, const std::string& cmd) {
    redisReply* r = static_cast<redisReply*>(redisCommand(c, cmd.c_str()));
    if (!r) return "";
    std::string out;
    if (r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    else if (r->type == REDIS_REPLY_NIL) out = "(nil)";
    else if (r->str) out.assign(r->str, r->len);
    freeReplyObject(r);
    return out;
  }

 private:
  static bool command_ok(redisContext* c, const std::string& cmd) { return command(c, cmd) == "OK"; }

  bool ping() const {
    timeval tv{0, 200000};
    Client c(redisConnectWithTimeout("127.0.0.1", port_, tv));
    if (!c || c->err) return false;
    redisSetTimeout(c.get(), tv);
    return command(c.get(), "PING") == "PONG";
  }

  void signal_and_reap(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);  // a paused server must be able to die
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

}  // namespace zl::test
