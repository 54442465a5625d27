// TLS contexts and per-connection set-up for the runtime (tls.hpp).
#include "runtime/aws/tls.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace leaseproof::runtime {
namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2 or later, as AWS endpoints require; no compression (CRIME).
constexpr auto kProtocolOptions = ssl::context::default_workarounds | ssl::context::no_sslv2 |
                                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                                  ssl::context::no_compression;

bool is_ip_literal(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

std::variant<TlsContextPtr, std::string> make_tls_client_context(const TlsClientOptions& options) {
  try {
    auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
    context->set_options(kProtocolOptions);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    context->set_verify_mode(ssl::verify_peer);
    if (options.ca_file.empty()) {
      context->set_default_verify_paths();
    } else {
      context->load_verify_file(options.ca_file);
    }
    return context;
  } catch (const boost::system::system_error& error) {
    if (options.ca_file.empty()) {
      return fmt::format("the system's certificate store: {}", error.code().message());
    }
    return fmt::format("CA file '{}': {} (expected PEM certificates)", options.ca_file, error.code().message());
  }
}

std::variant<TlsContextPtr, std::string> make_tls_server_context(const std::string& cert_file,
                                                                 const std::string& key_file) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(kProtocolOptions);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  context->use_certificate_chain_file(cert_file, ec);
  if (ec) return fmt::format("--tls-cert: '{}': {} (expected a PEM certificate chain)", cert_file, ec.message());
  context->use_private_key_file(key_file, ssl::context::pem, ec);
  const bool mismatch = ec && ec.category() == boost::asio::error::get_ssl_category() &&
                        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatch) return fmt::format("--tls-key: '{}': {} (expected a PEM private key)", key_file, ec.message());
  if (mismatch || SSL_CTX_check_private_key(context->native_handle()) != 1) {
    ERR_clear_error();
    return fmt::format("--tls-key: '{}' is not the private key of the certificate in '{}'", key_file, cert_file);
  }
  return context;
}

std::string resolve_ca_file(std::string_view flag, std::string_view aws_ca_bundle) {
  return std::string(flag.empty() ? aws_ca_bundle : flag);
}

bool prepare_tls_connection(void* native_ssl, const std::string& host, std::string& error) {
  SSL* connection = static_cast<SSL*>(native_ssl);
  if (is_ip_literal(host)) {
    // RFC 6066: no SNI for an address; the certificate must list it.
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection), host.c_str()) != 1) {
      error = fmt::format("cannot check the certificate against address {}", host);
      return false;
    }
    return true;
  }
  if (SSL_set_tlsext_host_name(connection, host.c_str()) != 1 || SSL_set1_host(connection, host.c_str()) != 1) {
    error = fmt::format("cannot check the certificate against host name '{}'", host);
    return false;
  }
  return true;
}

std::string describe_tls_failure(boost::system::error_code error, void* native_ssl) {
  SSL* connection = static_cast<SSL*>(native_ssl);
  if (connection != nullptr) {
    const long verdict = SSL_get_verify_result(connection);
    if (verdict != X509_V_OK) {
      const bool untrusted = verdict == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                             verdict == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                             verdict == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                             verdict == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT;
      return fmt::format("certificate rejected: {}{}", X509_verify_cert_error_string(verdict),
                         untrusted ? " (signed by no CA this process trusts: the system's store, or the "
                                     "file of --ca-file / AWS_CA_BUNDLE)"
                                   : "");
    }
  }
  if (error == ssl::error::stream_truncated || error == boost::asio::error::eof) {
    return "the server closed the connection during the TLS handshake (is it a TLS endpoint?)";
  }
  if (error.category() == boost::asio::error::get_ssl_category()) {
    const int reason = ERR_GET_REASON(static_cast<unsigned long>(error.value()));
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG) {
      return fmt::format("{}: the server does not speak TLS (a plain http:// server?)", error.message());
    }
  }
  return error.message();
}

}  // namespace leaseproof::runtime
