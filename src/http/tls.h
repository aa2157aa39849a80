// TLS for the server (internal to src/http): the context built from PEM
// files, and the handshake that picks the protocol by ALPN.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "http/conn_shared.h"

namespace zl::http::internal {

// A server context from a PEM certificate (the chain may follow the leaf in
// the same file) and its PEM private key: TLS 1.2 and 1.3 only, TLS 1.2
// limited to ECDHE with AES-GCM or ChaCha20-Poly1305, no renegotiation, no
// compression; ALPN offers h2 then http/1.1. kIo naming the file when a
// file cannot be read, does not parse, or the key does not match.
Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const std::string& cert_file,
                                                             const std::string& key_file);

// Runs the TLS handshake on `sock` (within ServerConfig::header_timeout),
// then serves HTTP/2 when ALPN chose h2, else HTTP/1.1 (which still sniffs
// the HTTP/2 preface). A failed or slow handshake closes the socket. On
// ioc's thread or not (the handshake is posted there).
void serve_tls(tcp::socket sock, asio::io_context& ioc, Shared& sh, std::shared_ptr<asio::ssl::context> ctx);

}  // namespace zl::http::internal
