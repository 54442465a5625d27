#pragma once
// Standard base64 (RFC 4648, with padding), the encoding of B and BS values on
// the wire. Private to core/dynamo.

#include <optional>
#include <string>
#include <string_view>

namespace leaseproof::dynamo {

// nullopt when the text is not canonical padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace leaseproof::dynamo
