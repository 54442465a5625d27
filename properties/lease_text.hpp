#pragma once
// Text helpers shared by the lease checkers (private to properties/).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/assert.hpp"
#include "base/ids.hpp"
#include "base/time.hpp"
#include "properties/lease_checkers.hpp"

namespace leaseproof::properties::text {

// The words of a note's detail, kept without allocating: a detail has a
// handful (every note is parsed, so this is on the hot path of every run).
class Words {
 public:
  static constexpr size_t kKept = 12;
  size_t size() const { return count_; }  // all the words, kept or not
  bool empty() const { return count_ == 0; }
  std::string_view operator[](size_t i) const {
    LP_ASSERT_LT(i, count_ < kKept ? count_ : kKept);
    return words_[i];
  }
  void add(std::string_view word) {
    if (count_ < kKept) words_[count_] = word;
    ++count_;
  }

 private:
  std::array<std::string_view, kKept> words_{};
  size_t count_ = 0;
};

// Words separated by single or repeated spaces.
Words split_words(std::string_view text);
std::optional<uint64_t> parse_u64(std::string_view text);

std::string node_name(const NodeNamer& names, NodeId node);
// "worker-3#2": node name, then incarnation.
std::string worker_name(const NodeNamer& names, WorkerIdentity worker);

// A wall reading as its offset from the simulation's wall epoch, with the
// clock's error against true time at the reading: "+1m5s (clock +15s)".
std::string wall_reading(Instant wall, Instant read_at);

bool is_dynamodb_operation(std::string_view label);

}  // namespace leaseproof::properties::text
