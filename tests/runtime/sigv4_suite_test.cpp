// sigv4_authorization against AWS's Signature Version 4 test suite, one test
// per case folder of tests/runtime/sigv4/ (see the README there for where the
// vectors come from and which cases were left out).
//
// sigv4_authorization takes a canonical URI and query and signs the headers it
// is given, so this file does what a caller does: it parses the suite's .req
// (request line, headers with folded lines unfolded, body) and canonicalizes
// the path and query as the suite's .creq shows. Those two lines are checked
// against the .creq on their own, so a failure tells the parsing here from the
// signing there.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/aws/dynamo_http_client.hpp"

namespace leaseproof::runtime {
namespace {

namespace fs = std::filesystem;

// Every case of the suite is signed with these (botocore's test_sigv4.py and
// aws-c-auth's context.json files give the same).
constexpr std::string_view suite_access_key_id = "AKIDEXAMPLE";
constexpr std::string_view suite_secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
constexpr std::string_view suite_amz_date = "20150830T123600Z";
constexpr std::string_view suite_region = "us-east-1";
constexpr std::string_view suite_service = "service";
// The folders copied into tests/runtime/sigv4/ (README.md lists them); a
// missing one must fail rather than shrink the suite quietly.
constexpr std::size_t suite_cases_expected = 34;

fs::path suite_dir() { return fs::path{LEASEPROOF_SIGV4_SUITE_DIR}; }

std::vector<std::string> suite_cases() {
  std::vector<std::string> cases;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator{suite_dir(), error}) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && fs::exists(entry.path() / (name + ".req"))) {
      cases.push_back(name);
    }
  }
  std::sort(cases.begin(), cases.end());  // directory order is the file system's
  return cases;
}

std::string read_file(const fs::path& path) {
  std::ifstream in{path, std::ios::binary};
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The suite's files end without a newline; an editor may add one.
std::string without_final_newline(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at = text.find(separator); at != std::string_view::npos; at = text.find(separator, start)) {
    parts.emplace_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

// ---------------------------------------------------------------------------
// The .req: "METHOD target HTTP/1.1", header lines, a blank line, the body.

struct SuiteRequest {
  std::string method;
  std::string path;   // raw, as in the request line: may hold spaces and UTF-8
  std::string query;  // after the first '?', raw
  std::vector<std::pair<std::string, std::string>> headers;  // in file order, repeats kept
  std::string body;
};

// The target sits between the first and the last space: get-space's path has
// a space of its own ("GET /example space/ HTTP/1.1").
void parse_request_line(std::string_view line, SuiteRequest& request) {
  const std::size_t method_end = line.find(' ');
  const std::size_t version_start = line.rfind(' ');
  ASSERT_NE(method_end, std::string_view::npos) << line;
  ASSERT_LT(method_end, version_start) << line;
  ASSERT_TRUE(line.substr(version_start + 1).starts_with("HTTP/")) << line;
  request.method = line.substr(0, method_end);
  const std::string_view target = line.substr(method_end + 1, version_start - method_end - 1);
  const std::size_t query_start = target.find('?');
  request.path = target.substr(0, query_start);
  if (query_start != std::string_view::npos) {
    request.query = target.substr(query_start + 1);
  }
}

// Names and values are passed on as written (case, surrounding and inner
// whitespace): normalizing them is the signer's job. A line that starts with
// whitespace continues the previous value (obs-fold, RFC 7230 section 3.2.4),
// which HTTP reads as a space: get-header-value-multiline.
void parse_header_lines(const std::vector<std::string>& lines, SuiteRequest& request) {
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty()) {
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      ASSERT_FALSE(request.headers.empty()) << "a continuation line before any header: " << line;
      request.headers.back().second += " " + line;
      continue;
    }
    const std::size_t colon = line.find(':');
    ASSERT_NE(colon, std::string::npos) << "not a header line: " << line;
    request.headers.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
}

SuiteRequest parse_request(std::string_view raw) {
  SuiteRequest request;
  std::string_view head = raw;
  const std::size_t blank = raw.find("\n\n");
  const std::size_t blank_crlf = raw.find("\r\n\r\n");
  if (blank_crlf != std::string_view::npos && blank_crlf < blank) {
    head = raw.substr(0, blank_crlf);
    request.body = raw.substr(blank_crlf + 4);
  } else if (blank != std::string_view::npos) {
    head = raw.substr(0, blank);
    request.body = raw.substr(blank + 2);
  }
  const std::vector<std::string> lines = split(head, '\n');
  std::string request_line = lines.front();
  if (!request_line.empty() && request_line.back() == '\r') {
    request_line.pop_back();
  }
  parse_request_line(request_line, request);
  parse_header_lines(lines, request);
  return request;
}

// ---------------------------------------------------------------------------
// Canonical URI and query, as the suite's .creq files show them.

// SigV4's URI encoding: unreserved characters (RFC 3986) stay, every other
// byte becomes %XX in upper case.
std::string uri_encode(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A '%' not followed by two hex digits stays as it is.
std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_digit_value(text[i + 1]) >= 0 &&
        hex_digit_value(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_digit_value(text[i + 1]) * 16 + hex_digit_value(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Services other than S3 sign the normalized path: empty and "." segments
// dropped, ".." removing the one before (normalize-path/*), then each
// segment URI-encoded (get-utf8, get-space, get-special-character). A
// trailing slash stays (get-slashes: "//example//" -> "/example/").
std::string canonical_uri_of(std::string_view path) {
  std::vector<std::string> kept;
  const std::vector<std::string> segments = split(path, '/');
  for (const std::string& segment : segments) {
    if (segment.empty() || segment == ".") {
      continue;
    }
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
      continue;
    }
    kept.push_back(uri_encode(segment));
  }
  std::string out;
  for (const std::string& segment : kept) {
    out += "/" + segment;
  }
  const std::string& last = segments.back();
  const bool ends_in_directory = last.empty() || last == "." || last == "..";
  return out.empty() ? "/" : (ends_in_directory ? out + "/" : out);
}

// Parameters decoded and encoded again the SigV4 way (the suite writes some
// encoded, get-vanilla-query-order-encoded, and some raw UTF-8,
// get-vanilla-utf8-query), then sorted by name and, for a repeated name, by
// value (get-vanilla-query-order-key, -value); a name without '=' gets an
// empty value.
std::string canonical_query_of(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> parameters;
  for (const std::string& parameter : split(query, '&')) {
    if (parameter.empty()) {
      continue;
    }
    const std::size_t equals = parameter.find('=');
    const std::string name = parameter.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : parameter.substr(equals + 1);
    parameters.emplace_back(uri_encode(percent_decode(name)), uri_encode(percent_decode(value)));
  }
  std::sort(parameters.begin(), parameters.end());
  std::string out;
  for (const auto& [name, value] : parameters) {
    out += fmt::format("{}{}={}", out.empty() ? "" : "&", name, value);
  }
  return out;
}

// ---------------------------------------------------------------------------

// The .creq's lines: method, canonical URI, canonical query, headers...
std::string creq_line(const std::string& creq, std::size_t index) {
  const std::vector<std::string> lines = split(creq, '\n');
  return index < lines.size() ? lines[index] : std::string{};
}

// get-vanilla-with-session-token carries its session token only as a
// credential (aws-c-auth's context.json): the signer adds and signs
// X-Amz-Security-Token. sigv4_authorization leaves that to its caller, so
// this adds the header as DynamoHttpClient does for a non-empty token.
void apply_context(const fs::path& folder, DynamoCredentials& credentials, SuiteRequest& request) {
  const fs::path context_path = folder / "context.json";
  if (!fs::exists(context_path)) {
    return;
  }
  const nlohmann::json context = nlohmann::json::parse(read_file(context_path));
  ASSERT_EQ(context.at("credentials").at("access_key_id"), suite_access_key_id);
  ASSERT_EQ(context.at("credentials").at("secret_access_key"), suite_secret_access_key);
  ASSERT_EQ(context.at("region"), suite_region);
  ASSERT_EQ(context.at("service"), suite_service);
  credentials.session_token = context.at("credentials").value("token", "");
  if (!credentials.session_token.empty()) {
    request.headers.emplace_back("X-Amz-Security-Token", credentials.session_token);
  }
}

class SigV4Suite : public ::testing::TestWithParam<std::string> {};

TEST_P(SigV4Suite, AuthorizationMatchesTheSuite) {
  const std::string& name = GetParam();
  const fs::path folder = suite_dir() / name;
  SuiteRequest request = parse_request(read_file(folder / (name + ".req")));
  ASSERT_FALSE(HasFatalFailure()) << "the .req of " << name << " does not parse";
  const std::string creq = without_final_newline(read_file(folder / (name + ".creq")));
  const std::string sts = without_final_newline(read_file(folder / (name + ".sts")));
  const std::string authz = without_final_newline(read_file(folder / (name + ".authz")));
  DynamoCredentials credentials{.access_key_id = std::string{suite_access_key_id},
                                .secret_access_key = std::string{suite_secret_access_key},
                                .session_token = ""};
  apply_context(folder, credentials, request);
  ASSERT_FALSE(HasFatalFailure());

  // The vectors agree with themselves, and sha256_hex with them.
  EXPECT_EQ(sha256_hex(creq), creq_line(sts, 3)) << "the .sts does not hash the .creq";
  EXPECT_EQ(sha256_hex(request.body), split(creq, '\n').back()) << "the body parsed from the .req";

  const std::string canonical_uri = canonical_uri_of(request.path);
  const std::string canonical_query = canonical_query_of(request.query);
  EXPECT_EQ(canonical_uri, creq_line(creq, 1)) << "this test's path canonicalization, not the signer";
  EXPECT_EQ(canonical_query, creq_line(creq, 2)) << "this test's query canonicalization, not the signer";

  const SigV4Request signing{
      .method = request.method,
      .canonical_uri = canonical_uri,
      .canonical_query = canonical_query,
      .headers = request.headers,
      .payload = request.body,
      .amz_date = suite_amz_date,
      .region = suite_region,
      .service = suite_service,
  };
  EXPECT_EQ(sigv4_authorization(signing, credentials), authz)
      << "expected canonical request:\n" << creq << "\n\nexpected string to sign:\n" << sts;
}

// gtest names allow letters, digits and '_': get-vanilla -> get_vanilla.
std::string case_test_name(const ::testing::TestParamInfo<std::string>& case_info) {
  std::string test_name = case_info.param;
  std::replace(test_name.begin(), test_name.end(), '-', '_');
  return test_name;
}

INSTANTIATE_TEST_SUITE_P(Aws, SigV4Suite, ::testing::ValuesIn(suite_cases()), case_test_name);

TEST(SigV4SuiteFolder, HoldsEveryCopiedCase) {
  EXPECT_EQ(suite_cases().size(), suite_cases_expected) << "cases found under " << suite_dir();
}

}  // namespace
}  // namespace leaseproof::runtime
