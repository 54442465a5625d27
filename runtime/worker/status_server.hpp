#pragma once
// A small HTTP endpoint for a process's health and metrics: GET /healthz
// (liveness: the process answers), GET /readyz (readiness) and GET /metrics,
// each answered from a callback; anything else 404. One request per
// connection (Connection: close), bounded in size and time. Single-threaded
// on the caller's io_context.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

namespace leaseproof::runtime {

class StatusServer {
 public:
  struct Routes {
    std::function<bool()> healthy;         // /healthz: 200 "ok" or 503 "unhealthy"; none: always 200
    std::function<std::string()> ready;    // /readyz: "" is 200 "ready", else 503 "not ready: <why>"; none: 404
    std::function<std::string()> metrics;  // /metrics: Prometheus text
  };
  // Binds and listens at once; throws std::system_error naming the address.
  StatusServer(boost::asio::io_context& io, const std::string& host, uint16_t port, Routes routes);
  ~StatusServer();
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;
  uint16_t port() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace leaseproof::runtime
