// Test helpers for the server: start `zerolayer serve` on a free port, and a
// blocking raw-socket HTTP/1.1 client (keep-alive, pipelining, chunked
// bodies, SSE frames) so tests see the exact bytes on the wire.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zl::test {

// `zerolayer serve <args> --port 0`, stdout read until the startup line.
class ServerProcess {
 public:
  // Runs `bin serve --port 0 args...`: the product by default, or the
  // test-only server (ZL_TEST_SERVER) for --fake-engine.
  explicit ServerProcess(const std::vector<std::string>& args, std::string bin = ZL_BIN) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test process
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      std::vector<std::string> all = {bin, "serve", "--port", "0"};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(out_fd_, &c, 1) != 1) break;
      if (c == '\n') break;
      line += c;
    }
    startup_line_ = line;
    const size_t at = line.find("://127.0.0.1:");  // http:// or https:// (--tls-cert)
    if (at != std::string::npos) port_ = std::atoi(line.c_str() + at + 13);
  }
  ~ServerProcess() { stop(); }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool ok() const { return port_ > 0; }
  const std::string& startup_line() const { return startup_line_; }

  // SIGTERM and wait; returns the exit status (or -1).
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped(status);
    return exit_code_;
  }
  // Sends `sig` without waiting (while the process runs).
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Waits up to timeout_ms for the process to exit on its own; its exit
  // status, or -1 while it still runs.
  int wait_exit(int timeout_ms) {
    if (pid_ <= 0) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped(status);
        return exit_code_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  void reaped(int status) {
    pid_ = -1;
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string startup_line_;
};

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;                            // de-chunked
  bool complete = false;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class RawClient {
 public:
  // rcvbuf_bytes > 0: a small receive buffer (set before connect, so the
  // TCP window is small too): a client that does not read stalls the server fast.
  explicit RawClient(int port, int rcvbuf_bytes = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf_bytes > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof rcvbuf_bytes);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawClient() { close_now(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  void close_now() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Resets the connection (RST) instead of a FIN.
  void abort_now() {
    if (fd_ < 0) return;
    linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close_now();
  }

  bool send_raw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads into the buffer until `pred` holds on it, EOF or the timeout. Returns false on EOF/timeout.
  template <typename Pred>
  bool read_until(Pred pred, int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!pred(buf_)) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) return false;
      char tmp[16384];
      ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) {
        eof_ = true;
        return pred(buf_);
      }
      buf_.append(tmp, static_cast<size_t>(n));
    }
    return true;
  }
  // One recv of at most max_bytes appended to the buffer, waiting up to
  // timeout_ms for bytes (a slow reader: small reads keep the TCP window
  // small). Returns the bytes read; 0 on EOF (eof() is then true) or timeout.
  size_t read_some(size_t max_bytes, int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (fd_ < 0 || poll(&p, 1, timeout_ms) <= 0) return 0;
    char tmp[16384];
    ssize_t n = recv(fd_, tmp, std::min(max_bytes, sizeof tmp), 0);
    if (n <= 0) {
      eof_ = true;
      return 0;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return static_cast<size_t>(n);
  }
  bool eof() const { return eof_; }
  std::string& buffer() { return buf_; }

  // True when the peer closed the connection within timeout_ms.
  bool wait_closed(int timeout_ms) {
    read_until([](const std::string&) { return false; }, timeout_ms);
    return eof_;
  }

  // Reads one whole response (Content-Length, chunked, or close-delimited).
  HttpReply read_response(int timeout_ms = 5000, bool head_request = false) {
    HttpReply r;
    if (!read_until([](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }, timeout_ms)) {
      return r;
    }
    const size_t hend = buf_.find("\r\n\r\n");
    std::string head = buf_.substr(0, hend);
    buf_.erase(0, hend + 4);
    r.status = std::atoi(head.c_str() + 9);
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos < head.size()) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, (next == std::string::npos ? head.size() : next) - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers[name] = line.substr(v);
      }
      pos = next;
    }
    if (r.status == 100) return read_response(timeout_ms, head_request);
    if (head_request) {
      r.complete = true;
      return r;
    }
    if (r.headers.count("content-length")) {
      const size_t len = std::stoul(r.headers["content-length"]);
      if (!read_until([&](const std::string& b) { return b.size() >= len; }, timeout_ms)) return r;
      r.body = buf_.substr(0, len);
      buf_.erase(0, len);
      r.complete = true;
    } else if (r.header("transfer-encoding") == "chunked") {
      for (;;) {
        if (!read_until([](const std::string& b) { return b.find("\r\n") != std::string::npos; }, timeout_ms)) return r;
        const size_t le = buf_.find("\r\n");
        const size_t n = std::stoul(buf_.substr(0, le), nullptr, 16);
        if (!read_until([&](const std::string& b) { return b.size() >= le + 2 + n + 2; }, timeout_ms)) return r;
        r.body += buf_.substr(le + 2, n);
        buf_.erase(0, le + 2 + n + 2);
        if (n == 0) break;
      }
      r.complete = true;
    } else {
      read_until([](const std::string&) { return false; }, timeout_ms);
      r.body = buf_;
      buf_.clear();
      r.complete = eof_;
    }
    return r;
  }

 private:
  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

inline std::string http_request(const std::string& method, const std::string& target, const std::string& body,
                                const std::vector<std::string>& extra_headers = {}) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : extra_headers) r += h + "\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n" + body;
  return r;
}

// True once a connection to `port` is refused (the listener closed), polling
// for up to timeout_ms.
inline bool wait_refused(int port, int timeout_ms = 10000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!RawClient(port).connected()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// One request on a fresh connection.
inline HttpReply fetch(int port, const std::string& method, const std::string& target, const std::string& body = "",
                       const std::vector<std::string>& headers = {}, int timeout_ms = 10000) {
  RawClient c(port);
  if (!c.connected()) return {};
  c.send_raw(http_request(method, target, body, headers));
  return c.read_response(timeout_ms, method == "HEAD");
}

struct SseEvent {
  std::string event;  // empty for data-only frames
  std::string data;
};

// Splits an SSE body into frames (blank-line separated).
inline std::vector<SseEvent> parse_sse(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string frame = body.substr(pos, end - pos);
    pos = end + 2;
    if (frame.empty()) continue;
    SseEvent e;
    size_t lp = 0;
    while (lp <= frame.size()) {
      size_t le = frame.find('\n', lp);
      if (le == std::string::npos) le = frame.size();
      std::string line = frame.substr(lp, le - lp);
      if (line.rfind("event: ", 0) == 0) e.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) e.data += line.substr(6);
      lp = le + 1;
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace zl::test
