// Loopback ports for tests: one that refuses connections (or accepts them
// and never answers), and one that was free a moment ago.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace zl::test {

// A port nobody listens on: bound (so no one else takes it) but not listening.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~DeadPort() { close(fd_); }
  DeadPort(const DeadPort&) = delete;
  DeadPort& operator=(const DeadPort&) = delete;
  int port() const { return port_; }
  // Starts listening without ever accepting: connections complete (backlog)
  // and then nothing is said.
  void listen_silently() { ::listen(fd_, 16); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port the kernel handed out and that was released at once.
inline int free_loopback_port() { return DeadPort().port(); }

}  // namespace zl::test
