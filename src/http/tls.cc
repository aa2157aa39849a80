#include "http/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/post.hpp>
#include <cstring>

#include "core/log.h"
#include "http/http1_connection.h"
#include "http/http2_session.h"

namespace zl::http::internal {
namespace {

// TLS 1.2 suites: forward secrecy and AEAD only (TLS 1.3's are all fine).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// ALPN, server side: h2 when the client offers it, else http/1.1; a client
// offering neither gets no ALPN answer (and HTTP/1.1).
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                void*) {
  for (const std::string_view want : {std::string_view("h2"), std::string_view("http/1.1")}) {
    for (unsigned int i = 0; i < inlen;) {
      const unsigned int len = in[i];
      if (i + 1 + len > inlen) break;
      if (len == want.size() && std::memcmp(in + i + 1, want.data(), len) == 0) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
  }
  return SSL_TLSEXT_ERR_NOACK;
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// One handshake in progress; counted as an open connection.
class Handshake : public std::enable_shared_from_this<Handshake> {
 public:
  Handshake(tcp::socket sock, asio::io_context& ioc, Shared& sh, std::shared_ptr<asio::ssl::context> ctx)
      : transport_(std::move(sock), std::move(ctx)), ioc_(ioc), sh_(sh), deadline_(ioc) {
    sh_.n_open.fetch_add(1);
  }
  ~Handshake() { sh_.n_open.fetch_sub(1); }

  void start() {
    deadline_.init(weak_from_this(), [this] { transport_.close(); });  // the handshake ends with an error
    deadline_.arm(sh_.cfg.header_timeout);
    transport_.tls()->async_handshake(asio::ssl::stream_base::server,
                                      [self = shared_from_this()](error_code ec) { self->done(ec); });
  }

 private:
  void done(error_code ec) {
    deadline_.cancel();
    if (ec) {
      log::debug("TLS handshake failed", {{"error", ec.message()}});
      transport_.close();
      return;
    }
    const unsigned char* proto = nullptr;
    unsigned int len = 0;
    SSL_get0_alpn_selected(transport_.tls()->native_handle(), &proto, &len);
    if (std::string_view(reinterpret_cast<const char*>(proto), proto ? len : 0) == "h2") {
      serve_http2(std::move(transport_), ioc_, sh_, {});
    } else {
      serve_http1(std::move(transport_), ioc_, sh_, /*on_io_thread=*/true);
    }
  }

  Transport transport_;
  asio::io_context& ioc_;
  Shared& sh_;
  Deadline deadline_;
};

}  // namespace

Result<std::shared_ptr<asio::ssl::context>> make_tls_context(const std::string& cert_file,
                                                             const std::string& key_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                  SSL_OP_SINGLE_ECDH_USE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) return io_error("TLS cipher list: " + openssl_error());
  SSL_CTX_set_alpn_select_cb(native, &select_alpn, nullptr);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(native, cert_file.c_str()) != 1) {
    return io_error("TLS certificate " + cert_file + ": " + openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(native, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return io_error("TLS private key " + key_file + ": " + openssl_error());
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return io_error("TLS private key " + key_file + " does not match the certificate " + cert_file + ": " +
                    openssl_error());
  }
  return ctx;
}

void serve_tls(tcp::socket sock, asio::io_context& ioc, Shared& sh, std::shared_ptr<asio::ssl::context> ctx) {
  auto hs = std::make_shared<Handshake>(std::move(sock), ioc, sh, std::move(ctx));
  asio::post(ioc, [hs] { hs->start(); });
}

}  // namespace zl::http::internal
