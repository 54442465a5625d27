#pragma once
// Escaping for text and attribute values in HTML, SVG and XML (the sweep's
// page and charts, the gate's JUnit XML).

#include <string>
#include <string_view>

namespace leaseproof::report {

// & < > " ' as entities; control characters other than \n, \t and \r (which
// XML 1.0 forbids even as entities) as '?'.
std::string escape_markup(std::string_view text);

}  // namespace leaseproof::report
