#pragma once
// TLS for the runtime's clients (OpenSSL through Asio/Beast ssl streams):
// one client context per process, verification on, TLS 1.2 or later.
//
// A client context trusts the system store (/etc/ssl/certs, as OpenSSL's
// default verify paths find it) or, when a CA file is given, that file alone,
// as AWS SDKs do with AWS_CA_BUNDLE. Each connection then sends the host name
// as SNI and checks the server's certificate against it (a DNS name, or an IP
// address literal against the certificate's IP entries).
//
// Every outcome is a value; no exception crosses this API.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

namespace leaseproof::runtime {

struct TlsClientOptions {
  // PEM file of the certificate authorities to trust instead of the system
  // store; empty: the system store.
  std::string ca_file;
};

using TlsContextPtr = std::shared_ptr<boost::asio::ssl::context>;

// The context, or a message naming what is wrong (an unreadable CA file).
std::variant<TlsContextPtr, std::string> make_tls_client_context(const TlsClientOptions& options);

// A server's context (the hub's --tls-cert/--tls-key): TLS 1.2 or later,
// the certificate chain from `cert_file` (PEM, the server's certificate
// first), its private key from `key_file` (PEM). The context, or a message
// naming the flag and what is wrong (unreadable, not PEM, a key that does not
// match the certificate).
std::variant<TlsContextPtr, std::string> make_tls_server_context(const std::string& cert_file,
                                                                 const std::string& key_file);

// The CA file a process uses: the flag when given, else the value of
// AWS_CA_BUNDLE (as AWS SDKs honour it), else none: the system store.
std::string resolve_ca_file(std::string_view flag, std::string_view aws_ca_bundle);

// Calls `operation` with a connection's stream: the TLS one when there is
// one, else the plain one (a client that speaks http:// and https://).
template <typename Plain, typename Tls, typename Operation>
void with_stream(Plain& plain, std::optional<Tls>& tls, Operation&& operation) {
  if (tls) {
    operation(*tls);
  } else {
    operation(plain);
  }
}

// Sets SNI and the host-name check on a fresh connection's SSL object. False,
// with `error` filled, when OpenSSL refuses the name.
bool prepare_tls_connection(void* native_ssl, const std::string& host, std::string& error);

// Why a handshake failed, for a message that names the endpoint: the
// certificate check's verdict when that failed ("certificate has expired",
// "hostname mismatch"), else the TLS error, with a hint when the server
// answered in plain text (an http server on an https URL).
std::string describe_tls_failure(boost::system::error_code error, void* native_ssl);

}  // namespace leaseproof::runtime
