// runtime/aws/aws_credentials.hpp: the credential chain against an injected
// environment, shared files in a temporary directory, and a stub container
// credentials endpoint on 127.0.0.1. No real HOME, no real AWS. Every wait is
// bounded.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/aws/aws_credentials.hpp"

namespace leaseproof::runtime {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace leaseproof::literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A directory of its own per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "leaseproof-credentials-XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` at `relative` (directories made as needed) and returns the full path.
  std::string write(const std::string& relative, const std::string& text) const {
    const auto full = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full, std::ios::binary) << text;
    return full.string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CredentialsChainOptions with_env(Environment env) {
  CredentialsChainOptions options;
  options.environment = std::move(env);
  return options;
}

// ---------------------------------------------------------------------------
// A credentials endpoint on 127.0.0.1 with a thread of its own. Each request
// gets the next scripted reply; the last one repeats.

struct StubReply {
  std::string raw;      // bytes written back, then the connection is closed
  bool silent = false;  // read the request, never answer
};

StubReply http_reply(int status, const std::string& body) {
  return StubReply{fmt::format("HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                               "Connection: close\r\n\r\n{}",
                               status, body.size(), body),
                   false};
}

std::string credentials_json(const std::string& key, const std::string& expiration) {
  return fmt::format(R"({{"AccessKeyId":"{}","SecretAccessKey":"secret-{}","Token":"token-{}","Expiration":"{}"}})",
                     key, key, key, expiration);
}

class StubEndpoint {
 public:
  explicit StubEndpoint(std::vector<StubReply> replies)
      : replies_(std::move(replies)), acceptor_(io_, tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0}) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~StubEndpoint() {
    io_.stop();
    thread_.join();
  }
  StubEndpoint(const StubEndpoint&) = delete;
  StubEndpoint& operator=(const StubEndpoint&) = delete;

  std::string authority() const { return fmt::format("127.0.0.1:{}", acceptor_.local_endpoint().port()); }
  std::string url(const std::string& path) const { return "http://" + authority() + path; }

  struct Seen {
    std::string target;
    std::string authorization;  // "" when absent
    std::string method;
    std::string metadata_token;      // X-aws-ec2-metadata-token
    std::string metadata_token_ttl;  // X-aws-ec2-metadata-token-ttl-seconds
    std::string body;
  };
  std::vector<Seen> seen() const {
    const std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  struct Connection {
    explicit Connection(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    std::string reply;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      auto connection = std::make_shared<Connection>(std::move(socket));
      http::async_read(connection->socket, connection->buffer, connection->request,
                       [this, connection](boost::system::error_code read_ec, std::size_t) {
                         if (!read_ec) answer(connection);
                       });
      accept();
    });
  }

  void answer(const std::shared_ptr<Connection>& connection) {
    StubReply reply;
    {
      const std::lock_guard lock(mutex_);
      const auto& request = connection->request;
      seen_.push_back({std::string(request.target()), std::string(request[http::field::authorization]),
                       std::string(request.method_string()), std::string(request["X-aws-ec2-metadata-token"]),
                       std::string(request["X-aws-ec2-metadata-token-ttl-seconds"]), request.body()});
      reply = replies_[std::min(seen_.size() - 1, replies_.size() - 1)];
    }
    if (reply.silent) {
      held_.push_back(connection);  // open and unanswered until the stub goes
      return;
    }
    connection->reply = std::move(reply.raw);
    asio::async_write(connection->socket, asio::buffer(connection->reply),
                      [connection](boost::system::error_code, std::size_t) {
                        boost::system::error_code ignored;
                        connection->socket.shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  std::vector<StubReply> replies_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<Seen> seen_;
  std::vector<std::shared_ptr<Connection>> held_;  // stub thread only
};

// Runs `io` until `done()` or 5 s.
template <typename Done>
bool run_until(asio::io_context& io, Done done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < give_up) {
    io.run_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
  return done();
}

// ---------------------------------------------------------------------------
// Environment.

TEST(CredentialsEnvironment, KeyAndSecretWithAndWithoutSessionToken) {
  auto result = resolve_credentials_blocking(
      with_env({{"AWS_ACCESS_KEY_ID", "AKIDENV"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDENV");
  EXPECT_EQ(result.value().credentials.secret_access_key, "envsecret");
  EXPECT_EQ(result.value().credentials.session_token, "");
  EXPECT_EQ(result.value().origin, CredentialsOrigin::environment);
  EXPECT_FALSE(result.value().expiration_wall_ns.has_value());

  result = resolve_credentials_blocking(with_env(
      {{"AWS_ACCESS_KEY_ID", "AKIDENV"}, {"AWS_SECRET_ACCESS_KEY", "envsecret"}, {"AWS_SESSION_TOKEN", "envtoken"}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.session_token, "envtoken");
}

TEST(CredentialsEnvironment, AKeyIdWithoutItsSecretIsAnErrorNamingTheMissingVariable) {
  TempDir home;
  home.write(".aws/credentials", "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n");
  auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}, {"AWS_ACCESS_KEY_ID", "AKIDENV"}}));
  ASSERT_FALSE(result.ok()) << "fell through to the profile: " << result.value().description;
  EXPECT_TRUE(contains(result.error().detail, "AWS_SECRET_ACCESS_KEY is not")) << result.error().detail;

  result = resolve_credentials_blocking(with_env({{"AWS_SECRET_ACCESS_KEY", "envsecret"}}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().detail, "AWS_ACCESS_KEY_ID is not")) << result.error().detail;
}

// ---------------------------------------------------------------------------
// Shared files.

TEST(CredentialsProfile, DefaultProfileFromTheCredentialsFileUnderHome) {
  TempDir home;
  home.write(".aws/credentials",
             "[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = othersecret\n"
             "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = defaultsecret\n"
             "aws_session_token = defaulttoken\n");
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(result.value().credentials.secret_access_key, "defaultsecret");
  EXPECT_EQ(result.value().credentials.session_token, "defaulttoken");
  EXPECT_EQ(result.value().origin, CredentialsOrigin::profile);
  EXPECT_TRUE(contains(result.value().description, "profile 'default'")) << result.value().description;
}

TEST(CredentialsProfile, NamedProfileFromTheOptionBeatsAwsProfile) {
  TempDir home;
  home.write(".aws/credentials",
             "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s0\n"
             "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s1\n"
             "[prod]\naws_access_key_id = AKIDPROD\naws_secret_access_key = s2\n");
  auto options = with_env({{"HOME", home.path()}, {"AWS_PROFILE", "dev"}});
  auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDDEV");
  options.profile = "prod";
  result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDPROD");
}

TEST(CredentialsProfile, ConfigFileSectionsAreProfilePrefixedExceptDefault) {
  TempDir home;
  home.write(".aws/config",
             "[default]\naws_access_key_id = AKIDCONFIGDEFAULT\naws_secret_access_key = s0\n"
             "[ci]\naws_access_key_id = AKIDBARESECTION\naws_secret_access_key = s1\n"
             "[profile ci]\naws_access_key_id = AKIDCI\naws_secret_access_key = s2\n");
  auto options = with_env({{"HOME", home.path()}});
  auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCONFIGDEFAULT");
  options.profile = "ci";
  result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCI");  // not the bare [ci]
  EXPECT_TRUE(contains(result.value().description, ".aws/config")) << result.value().description;
}

TEST(CredentialsProfile, CredentialsFileBeatsConfigFileForTheSameProfile) {
  TempDir home;
  home.write(".aws/config", "[profile dev]\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = configsecret\n"
                            "aws_session_token = configtoken\n");
  home.write(".aws/credentials", "[dev]\naws_access_key_id = AKIDCREDS\naws_secret_access_key = credssecret\n");
  auto options = with_env({{"HOME", home.path()}});
  options.profile = "dev";
  const auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCREDS");
  EXPECT_EQ(result.value().credentials.secret_access_key, "credssecret");
  EXPECT_EQ(result.value().credentials.session_token, "");  // never mixed in from the config file
}

TEST(CredentialsProfile, CommentsWhitespaceAndCaseAreHandled) {
  TempDir home;
  home.write(".aws/credentials",
             "# a comment\r\n"
             "; another comment\r\n"
             "\r\n"
             "  [  default  ]   # trailing comment\r\n"
             "\tAWS_Access_Key_ID\t=   AKIDSPACED   \r\n"
             "aws_secret_access_key=tight ; inline comment\r\n"
             "s3 =\r\n"
             "  aws_session_token = not-a-token-but-a-sub-property\r\n"
             "#aws_session_token = commented-out\r\n");
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDSPACED");
  EXPECT_EQ(result.value().credentials.secret_access_key, "tight");
  EXPECT_EQ(result.value().credentials.session_token, "");
}

TEST(CredentialsProfile, VariablesNameTheFilesInsteadOfHome) {
  TempDir dir;
  const auto credentials = dir.write("elsewhere/creds.ini", "[default]\naws_access_key_id = AKIDVAR\n"
                                                            "aws_secret_access_key = s\n");
  dir.write("home/.aws/credentials", "[default]\naws_access_key_id = AKIDHOME\naws_secret_access_key = s\n");
  const auto result = resolve_credentials_blocking(
      with_env({{"HOME", dir.path() + "/home"}, {"AWS_SHARED_CREDENTIALS_FILE", credentials}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDVAR");
}

TEST(CredentialsProfile, MissingFilesAndNoSourceGiveAnErrorListingWhatWasTried) {
  TempDir home;  // empty: no .aws at all
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}}));
  ASSERT_FALSE(result.ok()) << result.value().description;
  const auto& detail = result.error().detail;
  EXPECT_TRUE(contains(detail, "no AWS credentials found")) << detail;
  EXPECT_TRUE(contains(detail, "AWS_ACCESS_KEY_ID not set")) << detail;
  EXPECT_TRUE(contains(detail, "profile 'default'")) << detail;
  EXPECT_TRUE(contains(detail, home.path() + "/.aws/credentials (no such file)")) << detail;
  EXPECT_TRUE(contains(detail, home.path() + "/.aws/config (no such file)")) << detail;
  EXPECT_TRUE(contains(detail, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")) << detail;

  const auto without_home = resolve_credentials_blocking(with_env({}));
  ASSERT_FALSE(without_home.ok());
  EXPECT_TRUE(contains(without_home.error().detail, "HOME")) << without_home.error().detail;
}

TEST(CredentialsProfile, ANamedProfileThatIsNowhereIsAnErrorNamingProfileAndFiles) {
  TempDir home;
  const auto credentials = home.write(".aws/credentials", "[default]\naws_access_key_id = A\naws_secret_access_key = s\n");
  const auto config = home.write(".aws/config", "[profile other]\nregion = eu-west-1\n");
  auto options = with_env({{"HOME", home.path()}, {"AWS_PROFILE", "staging"}});
  const auto result = resolve_credentials_blocking(options);
  ASSERT_FALSE(result.ok()) << "fell back to " << result.value().description;
  EXPECT_TRUE(contains(result.error().detail, "profile 'staging' not found")) << result.error().detail;
  EXPECT_TRUE(contains(result.error().detail, credentials)) << result.error().detail;
  EXPECT_TRUE(contains(result.error().detail, config)) << result.error().detail;
}

TEST(CredentialsProfile, AKeyIdWithoutItsSecretInAProfileIsAnError) {
  TempDir home;
  home.write(".aws/credentials", "[default]\naws_access_key_id = AKIDALONE\n");
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().detail, "no aws_secret_access_key")) << result.error().detail;
}

// ---------------------------------------------------------------------------
// Region.

// Editors on Windows start a file with a UTF-8 byte order mark; the first
// section must still be found (it was lost: the line did not start with '[').
TEST(CredentialsProfile, AByteOrderMarkBeforeTheFirstSectionIsSkipped) {
  TempDir home;
  home.write(".aws/credentials", "\xEF\xBB\xBF[default]\naws_access_key_id = AKIDBOM\naws_secret_access_key = s\n");
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDBOM");
}

// A profile named by AWS_PROFILE whose credentials come from a source
// leaseproof lacks (assume-role here) is an error naming it: the chain went
// on past it and the command signed with the local placeholder.
TEST(CredentialsProfile, AProfileThatAssumesARoleIsAnErrorNamingRoleArn) {
  TempDir home;
  home.write(".aws/config", "[profile deploy]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = base\n");
  const auto result = resolve_credentials_blocking(with_env({{"HOME", home.path()}, {"AWS_PROFILE", "deploy"}}));
  ASSERT_FALSE(result.ok()) << result.value().description;
  EXPECT_TRUE(contains(result.error().detail, "profile 'deploy'")) << result.error().detail;
  EXPECT_TRUE(contains(result.error().detail, "from role_arn, which leaseproof does not support"))
      << result.error().detail;
}

TEST(CredentialsRegion, AwsRegionThenAwsDefaultRegionThenTheProfileThenUsEast1) {
  TempDir home;
  home.write(".aws/config", "[default]\nregion = eu-central-1\n[profile dev]\nregion = ap-south-1\n");
  Environment env{{"HOME", home.path()}, {"AWS_REGION", "us-west-2"}, {"AWS_DEFAULT_REGION", "eu-west-1"}};
  EXPECT_EQ(resolve_region(with_env(env)), "us-west-2");
  env.erase("AWS_REGION");
  EXPECT_EQ(resolve_region(with_env(env)), "eu-west-1");
  env.erase("AWS_DEFAULT_REGION");
  EXPECT_EQ(resolve_region(with_env(env)), "eu-central-1");
  env["AWS_PROFILE"] = "dev";
  EXPECT_EQ(resolve_region(with_env(env)), "ap-south-1");
  auto options = with_env(env);
  options.profile = "nowhere";
  EXPECT_EQ(resolve_region(options), "us-east-1");
  EXPECT_EQ(resolve_region(with_env({})), "us-east-1");
}

// ---------------------------------------------------------------------------
// Container endpoint.

TEST(CredentialsContainer, FullUriWithAuthorizationTokenFromTheVariable) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDCONTAINER", "2030-01-02T03:04:05Z"))});
  const auto result = resolve_credentials_blocking(with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/v2/creds?a=1")},
                                                             {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "Basic abc123"}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCONTAINER");
  EXPECT_EQ(result.value().credentials.secret_access_key, "secret-AKIDCONTAINER");
  EXPECT_EQ(result.value().credentials.session_token, "token-AKIDCONTAINER");
  EXPECT_EQ(result.value().origin, CredentialsOrigin::container);
  ASSERT_TRUE(result.value().expiration_wall_ns.has_value());
  EXPECT_EQ(*result.value().expiration_wall_ns, *parse_iso8601_ns("2030-01-02T03:04:05Z"));
  const auto seen = stub.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/v2/creds?a=1");
  EXPECT_EQ(seen[0].authorization, "Basic abc123");
}

TEST(CredentialsContainer, TokenFileBeatsTokenVariableAndIsTrimmed) {
  TempDir dir;
  const auto token_file = dir.write("token", "eks-pod-identity-token\n");
  StubEndpoint stub({http_reply(200, credentials_json("AKIDEKS", "2030-01-02T03:04:05Z"))});
  const auto result = resolve_credentials_blocking(with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")},
                                                             {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "from-variable"},
                                                             {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token_file}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  const auto seen = stub.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "eks-pod-identity-token");

  const auto missing = resolve_credentials_blocking(with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")},
                                                              {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir.path() + "/nope"}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error().detail, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) << missing.error().detail;
  EXPECT_EQ(stub.seen().size(), 1u);  // no request without the token
}

TEST(CredentialsContainer, RelativeUriGoesToTheContainerHostAndBeatsFullUri) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDECS", "2030-01-02T03:04:05Z"))});
  auto options = with_env({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/guid"},
                           {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/never"}});
  options.container_host = stub.authority();
  const auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDECS");
  const auto seen = stub.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/v2/credentials/guid");
  EXPECT_EQ(seen[0].authorization, "");
}

TEST(CredentialsContainer, FullUriMustBePlainHttpToALoopbackOrContainerAddress) {
  for (const std::string uri : {"http://10.1.2.3/creds", "http://169.254.169.254/latest", "https://127.0.0.1/creds",
                                "ftp://127.0.0.1/creds", "not a url"}) {
    const auto result = resolve_credentials_blocking(with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", uri}}));
    ASSERT_FALSE(result.ok()) << uri;
    EXPECT_TRUE(contains(result.error().detail, "AWS_CONTAINER_CREDENTIALS_FULL_URI")) << result.error().detail;
  }
}

TEST(CredentialsContainer, EveryMalformedAnswerIsAnErrorNamingWhatWasWrong) {
  struct Case {
    StubReply reply;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {http_reply(500, "internal error"), "HTTP 500"},
      {http_reply(404, ""), "HTTP 404"},
      {http_reply(200, "<html>hello</html>"), "not JSON"},
      {http_reply(200, "[1,2,3]"), "not a JSON object"},
      {http_reply(200, R"({"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"2030-01-01T00:00:00Z"})"), "no Token"},
      {http_reply(200, R"({"AccessKeyId":7,"SecretAccessKey":"S","Token":"T","Expiration":"2030-01-01T00:00:00Z"})"),
       "AccessKeyId is not"},
      {http_reply(200, R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"tomorrow"})"),
       "Expiration 'tomorrow'"},
      {http_reply(200, R"({"AccessKeyId":"A","SecretAccessKey":"S","Token":"T","Expiration":"2030-02-30T00:00:00Z"})"),
       "Expiration"},
      {http_reply(200, std::string(100, '[') + std::string(100, ']')), "levels deep"},
      {http_reply(200, std::string(70 * 1024, ' ')), "larger than"},
      {StubReply{"garbage that is not HTTP\r\n\r\n", false}, "no complete HTTP answer"},
  };
  for (const auto& c : cases) {
    StubEndpoint stub({c.reply});
    const auto result =
        resolve_credentials_blocking(with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")}}));
    ASSERT_FALSE(result.ok()) << c.expected;
    EXPECT_TRUE(contains(result.error().detail, c.expected)) << "expected '" << c.expected << "' in "
                                                            << result.error().detail;
    EXPECT_TRUE(contains(result.error().detail, stub.url("/creds"))) << result.error().detail;
  }
}

TEST(CredentialsContainer, ASilentServerIsATimeoutError) {
  StubEndpoint stub({StubReply{"", true}});
  auto options = with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")}});
  options.container_timeout = 300_ms;
  const auto started = std::chrono::steady_clock::now();
  const auto result = resolve_credentials_blocking(options);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().detail, "no answer within 300ms")) << result.error().detail;
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(CredentialsContainer, ARefusedConnectionIsAnError) {
  uint16_t closed_port = 0;
  {
    asio::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0});
    closed_port = acceptor.local_endpoint().port();
  }
  const auto result = resolve_credentials_blocking(
      with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", fmt::format("http://127.0.0.1:{}/creds", closed_port)}}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().detail, "cannot connect")) << result.error().detail;
}

// ---------------------------------------------------------------------------
// Refresh, with the wall clock held just before the first Expiration.

constexpr std::string_view first_expiration = "2030-01-01T00:00:00Z";

CredentialsChainOptions refreshing_options(const StubEndpoint& stub) {
  auto options = with_env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")}});
  const int64_t expiration = *parse_iso8601_ns(first_expiration);
  // 400 ms before expiry, less than twice the margin: refresh after half, 200 ms.
  options.wall_clock_ns = [expiration] { return expiration - 400'000'000; };
  options.retry_delay_initial = 50_ms;
  options.retry_delay_max = 100_ms;
  options.jitter_seed = 7;
  return options;
}

TEST(CredentialsRefresh, TheSourceHandsOutTheNewKeyAfterARefresh) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDFIRST", std::string(first_expiration))),
                     http_reply(200, credentials_json("AKIDSECOND", "2030-01-02T00:00:00Z"))});
  asio::io_context io;
  CredentialsChain chain(io, refreshing_options(stub));
  const CredentialsSource source = chain.source();
  EXPECT_EQ(source().access_key_id, "");  // nothing before the first success
  std::optional<CredentialsResult> first;
  chain.start([&first](const CredentialsResult& result) { first.emplace(result); });
  ASSERT_TRUE(run_until(io, [&] { return first.has_value(); }));
  ASSERT_TRUE(first->ok()) << first->error().detail;
  EXPECT_EQ(source().access_key_id, "AKIDFIRST");
  EXPECT_EQ(source().session_token, "token-AKIDFIRST");
  ASSERT_TRUE(run_until(io, [&] { return source().access_key_id == "AKIDSECOND"; })) << source().access_key_id;
  EXPECT_EQ(source().secret_access_key, "secret-AKIDSECOND");
  EXPECT_EQ(chain.stats().refreshes_succeeded, 1u);
  EXPECT_EQ(chain.stats().refreshes_failed, 0u);
  // The second key expires a day later: no further refresh for a while.
  io.run_for(std::chrono::milliseconds(400));
  EXPECT_EQ(stub.seen().size(), 2u);
}

TEST(CredentialsRefresh, AFailedRefreshKeepsTheOldCredentialsAndIsRetried) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDFIRST", std::string(first_expiration))),
                     http_reply(503, "try later"), http_reply(200, "not json"),
                     http_reply(200, credentials_json("AKIDSECOND", "2030-01-02T00:00:00Z"))});
  asio::io_context io;
  CredentialsChain chain(io, refreshing_options(stub));
  const CredentialsSource source = chain.source();
  bool resolved = false;
  chain.start([&resolved](const CredentialsResult&) { resolved = true; });
  ASSERT_TRUE(run_until(io, [&] { return chain.stats().refreshes_failed >= 1; }));
  EXPECT_EQ(source().access_key_id, "AKIDFIRST");
  EXPECT_TRUE(contains(chain.stats().last_refresh_error, "HTTP 503")) << chain.stats().last_refresh_error;
  ASSERT_TRUE(run_until(io, [&] { return source().access_key_id == "AKIDSECOND"; })) << source().access_key_id;
  EXPECT_TRUE(resolved);
  EXPECT_EQ(chain.stats().refreshes_failed, 2u);
  EXPECT_EQ(chain.stats().refreshes_succeeded, 1u);
  EXPECT_EQ(chain.stats().last_refresh_error, "");
  EXPECT_EQ(stub.seen().size(), 4u);
}

TEST(CredentialsRefresh, ASourceOutlivesItsChainWithTheLastValue) {
  CredentialsSource source;
  {
    asio::io_context io;
    CredentialsChain chain(io, with_env({{"AWS_ACCESS_KEY_ID", "AKIDENV"}, {"AWS_SECRET_ACCESS_KEY", "s"}}));
    source = chain.source();
    bool resolved = false;
    chain.start([&resolved](const CredentialsResult&) { resolved = true; });
    ASSERT_TRUE(run_until(io, [&] { return resolved; }));
  }
  EXPECT_EQ(source().access_key_id, "AKIDENV");
}

// Credentials past their Expiration are refused: AWS would refuse every
// request signed with them. The old ones stay, and the next try waits for
// the retry backoff (1 s here) instead of a refresh delay computed from a
// past Expiration, which polled every refresh_delay_min (100 ms).
TEST(CredentialsRefresh, ExpiredCredentialsAreAFailedRefreshRetriedWithBackoffAndReported) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDFIRST", std::string(first_expiration))),
                     http_reply(200, credentials_json("AKIDSTALE", "2029-12-31T23:00:00Z"))});
  auto options = refreshing_options(stub);
  options.retry_delay_initial = 1_s;
  options.retry_delay_max = 2_s;
  std::vector<CredentialsResult> reported;
  options.on_refresh = [&reported](const CredentialsResult& result) { reported.push_back(result); };
  asio::io_context io;
  CredentialsChain chain(io, options);
  const CredentialsSource source = chain.source();
  bool resolved = false;
  chain.start([&resolved](const CredentialsResult&) { resolved = true; });
  ASSERT_TRUE(run_until(io, [&] { return chain.stats().refreshes_failed >= 1; }));
  io.run_for(std::chrono::milliseconds(400));  // well inside the first retry delay (0.5 s .. 1 s)
  EXPECT_TRUE(resolved);
  EXPECT_EQ(source().access_key_id, "AKIDFIRST");
  EXPECT_EQ(stub.seen().size(), 2u);  // the first fetch and one refresh, no polling
  EXPECT_EQ(chain.stats().refreshes_failed, 1u);
  EXPECT_TRUE(contains(chain.stats().last_refresh_error, "handed out credentials that expired 59m59.6s ago"))
      << chain.stats().last_refresh_error;
  ASSERT_EQ(reported.size(), 1u);  // the process hears of the failure (the worker logs it)
  EXPECT_FALSE(reported[0].ok());
}

TEST(CredentialsRefresh, ExpiredCredentialsAtTheFirstResolutionAreAnError) {
  StubEndpoint stub({http_reply(200, credentials_json("AKIDSTALE", "2029-12-31T23:00:00Z"))});
  const auto result = resolve_credentials_blocking(refreshing_options(stub));
  ASSERT_FALSE(result.ok()) << result.value().credentials.access_key_id;
  EXPECT_TRUE(contains(result.error().detail, "container http://127.0.0.1:")) << result.error().detail;
  EXPECT_TRUE(contains(result.error().detail, "handed out credentials that expired")) << result.error().detail;
}

// ---------------------------------------------------------------------------
// EC2 instance metadata (IMDSv2), at AWS_EC2_METADATA_SERVICE_ENDPOINT.

CredentialsChainOptions metadata_options(const StubEndpoint& stub, Environment env = {}) {
  env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://" + stub.authority() + "/";
  auto options = with_env(std::move(env));
  options.instance_metadata_timeout = 300_ms;
  options.wall_clock_ns = [] { return *parse_iso8601_ns("2029-06-01T00:00:00Z"); };
  return options;
}

TEST(CredentialsInstanceMetadata, ATokenThenTheRoleThenItsCredentials) {
  StubEndpoint stub({http_reply(200, "TOKEN-1"), http_reply(200, "worker-role\n"),
                     http_reply(200, R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"AKIDIMDS",)"
                                     R"("SecretAccessKey":"s","Token":"t","Expiration":"2030-01-01T00:00:00Z"})")});
  const auto result = resolve_credentials_blocking(metadata_options(stub));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDIMDS");
  EXPECT_EQ(result.value().credentials.session_token, "t");
  EXPECT_EQ(result.value().origin, CredentialsOrigin::instance_metadata);
  EXPECT_TRUE(result.value().expiration_wall_ns.has_value());
  const auto seen = stub.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].target, "/latest/api/token");
  EXPECT_EQ(seen[0].metadata_token_ttl, "21600");
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_EQ(seen[1].target, "/latest/meta-data/iam/security-credentials/");
  EXPECT_EQ(seen[1].metadata_token, "TOKEN-1");
  EXPECT_EQ(seen[2].target, "/latest/meta-data/iam/security-credentials/worker-role");
  EXPECT_EQ(seen[2].metadata_token, "TOKEN-1");
}

TEST(CredentialsInstanceMetadata, FailuresNameTheStepAndSilenceMeansNotOnEc2) {
  {  // IMDSv2 refused the token (a hop limit of 1 from a container answers so): an error.
    StubEndpoint stub({http_reply(403, "Forbidden")});
    const auto result = resolve_credentials_blocking(metadata_options(stub));
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(contains(result.error().detail, "HTTP 403 for the IMDSv2 session token")) << result.error().detail;
  }
  {  // No role attached: nothing found, said in the list of what was tried.
    StubEndpoint stub({http_reply(200, "TOKEN-1"), http_reply(404, "")});
    const auto result = resolve_credentials_blocking(metadata_options(stub));
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(contains(result.error().detail, "no AWS credentials found")) << result.error().detail;
    EXPECT_TRUE(contains(result.error().detail, "(no IAM role attached)")) << result.error().detail;
  }
  {  // Nobody answers within the timeout: not an EC2 machine after all.
    StubEndpoint stub({StubReply{"", true}});
    const auto started = std::chrono::steady_clock::now();
    const auto result = resolve_credentials_blocking(metadata_options(stub));
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(contains(result.error().detail, "no answer within 300ms")) << result.error().detail;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  }
  {  // Expired credentials from metadata are refused like any others.
    StubEndpoint stub({http_reply(200, "TOKEN-1"), http_reply(200, "r"),
                       http_reply(200, credentials_json("AKIDOLD", "2029-01-01T00:00:00Z"))});
    const auto result = resolve_credentials_blocking(metadata_options(stub));
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(contains(result.error().detail, "handed out credentials that expired")) << result.error().detail;
  }
}

TEST(CredentialsInstanceMetadata, NotAskedWhenDisabledOrOffEc2) {
  StubEndpoint stub({http_reply(200, "TOKEN-1")});
  const auto disabled = resolve_credentials_blocking(metadata_options(stub, {{"AWS_EC2_METADATA_DISABLED", "TRUE"}}));
  ASSERT_FALSE(disabled.ok());
  EXPECT_TRUE(contains(disabled.error().detail, "instance metadata (AWS_EC2_METADATA_DISABLED=true)"))
      << disabled.error().detail;
  // No endpoint named and a machine whose DMI says another vendor: 169.254.169.254 is never asked.
  TempDir machine;
  auto options = with_env({});
  options.dmi_sys_vendor_path = machine.write("sys_vendor", "QEMU\n");
  options.hypervisor_uuid_path = machine.path() + "/no-such-file";
  const auto elsewhere = resolve_credentials_blocking(options);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_TRUE(contains(elsewhere.error().detail, "instance metadata (not an EC2 machine")) << elsewhere.error().detail;
  EXPECT_TRUE(stub.seen().empty());
}

// ---------------------------------------------------------------------------
// Web identity: STS AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS.

std::string sts_answer(const std::string& key, const std::string& expiration) {
  return fmt::format(
      "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
      "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{}</AccessKeyId>"
      "<SecretAccessKey>secret&amp;1</SecretAccessKey><SessionToken>token-{}</SessionToken>"
      "<Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
      "</AssumeRoleWithWebIdentityResponse>",
      key, key, expiration);
}

Environment web_identity_env(const TempDir& dir, const StubEndpoint& stub) {
  return {{"HOME", dir.path()},
          {"AWS_WEB_IDENTITY_TOKEN_FILE", dir.write("token", "eyJ.token+/=\n")},
          {"AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/workers"},
          {"AWS_ROLE_SESSION_NAME", "w-0"},
          {"AWS_REGION", "eu-west-1"},
          {"AWS_ENDPOINT_URL_STS", stub.url("/")}};
}

TEST(CredentialsWebIdentity, TheTokenFileAndRoleGoToStsAndItsCredentialsComeBack) {
  TempDir dir;
  // A profile with keys too: web identity comes first, as in AWS SDKs.
  dir.write(".aws/credentials", "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n");
  StubEndpoint stub({http_reply(200, sts_answer("AKIDSTS", "2030-01-01T00:00:00Z"))});
  auto options = with_env(web_identity_env(dir, stub));
  options.wall_clock_ns = [] { return *parse_iso8601_ns("2029-06-01T00:00:00Z"); };
  const auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDSTS");
  EXPECT_EQ(result.value().credentials.secret_access_key, "secret&1");
  EXPECT_EQ(result.value().credentials.session_token, "token-AKIDSTS");
  EXPECT_EQ(result.value().origin, CredentialsOrigin::web_identity);
  const auto seen = stub.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].authorization, "");  // AssumeRoleWithWebIdentity is not signed
  EXPECT_EQ(seen[0].body,
            "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fworkers"
            "&RoleSessionName=w-0&WebIdentityToken=eyJ.token%2B%2F%3D");
}

// An explicit profile (--profile) replaces the environment's keys and web
// identity, as Session(profile=...) and the CLI's --profile do in botocore;
// AWS_PROFILE does not (botocore reads it as any other setting).
TEST(CredentialsWebIdentity, AnExplicitProfileReplacesTheEnvironmentsKeysAndWebIdentity) {
  TempDir dir;
  dir.write(".aws/credentials", "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s\n");
  StubEndpoint stub({http_reply(200, sts_answer("AKIDSTS", "2030-01-01T00:00:00Z"))});
  Environment environment = web_identity_env(dir, stub);
  environment["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  environment["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  auto options = with_env(environment);
  options.profile = "dev";
  auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDDEV");
  EXPECT_TRUE(stub.seen().empty());  // STS never asked
  options.profile.clear();
  options.environment->emplace("AWS_PROFILE", "dev");
  result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDENV");
}

// STS is asked in the process's region (--region), and the endpoint it was
// asked at is named with where it came from.
TEST(CredentialsWebIdentity, StsIsAskedInTheGivenRegionAndNamedWithItsOrigin) {
  TempDir dir;
  StubEndpoint stub({http_reply(200, sts_answer("AKIDSTS", "2030-01-01T00:00:00Z"))});
  Environment environment = web_identity_env(dir, stub);
  auto options = with_env(environment);
  options.wall_clock_ns = [] { return *parse_iso8601_ns("2029-06-01T00:00:00Z"); };
  auto result = resolve_credentials_blocking(options);
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_TRUE(contains(result.value().description, "(from AWS_ENDPOINT_URL_STS)")) << result.value().description;
  // Without a configured URL the regional host of the given region (not
  // resolvable here: the error names it).
  environment.erase("AWS_ENDPOINT_URL_STS");
  options = with_env(environment);
  options.region = "ap-south-2";
  options.sts_timeout = Duration::from_ms(300);
  result = resolve_credentials_blocking(options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().detail, "https://sts.ap-south-2.amazonaws.com (from region ap-south-2)"))
      << result.error().detail;
}

TEST(CredentialsWebIdentity, StsRefusalsAndHalfConfigurationsAreErrors) {
  TempDir dir;
  StubEndpoint stub({http_reply(403, "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                                     "<Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>"
                                     "</Error></ErrorResponse>")});
  const auto refused = resolve_credentials_blocking(with_env(web_identity_env(dir, stub)));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().detail, "HTTP 403 AccessDenied: 'Not authorized")) << refused.error().detail;
  EXPECT_TRUE(contains(refused.error().detail, "arn:aws:iam::123456789012:role/workers")) << refused.error().detail;

  auto env = web_identity_env(dir, stub);
  env.erase("AWS_WEB_IDENTITY_TOKEN_FILE");
  const auto no_token = resolve_credentials_blocking(with_env(env));
  ASSERT_FALSE(no_token.ok());
  EXPECT_TRUE(contains(no_token.error().detail, "AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not"))
      << no_token.error().detail;
  env = web_identity_env(dir, stub);
  env["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir.path() + "/missing";
  const auto missing = resolve_credentials_blocking(with_env(env));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(contains(missing.error().detail, "/missing: no such file")) << missing.error().detail;
  EXPECT_EQ(stub.seen().size(), 1u);  // only the first asked STS
}

// ---------------------------------------------------------------------------
// Precedence across the chain.

TEST(CredentialsChainOrder, EnvironmentBeatsProfileBeatsContainer) {
  TempDir home;
  home.write(".aws/credentials", "[default]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n");
  StubEndpoint stub({http_reply(200, credentials_json("AKIDCONTAINER", "2030-01-02T03:04:05Z"))});
  Environment env{{"HOME", home.path()},
                  {"AWS_ACCESS_KEY_ID", "AKIDENV"},
                  {"AWS_SECRET_ACCESS_KEY", "s"},
                  {"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")}};
  auto result = resolve_credentials_blocking(with_env(env));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDENV");
  env.erase("AWS_ACCESS_KEY_ID");
  env.erase("AWS_SECRET_ACCESS_KEY");
  result = resolve_credentials_blocking(with_env(env));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDPROFILE");
  std::filesystem::remove(home.path() + "/.aws/credentials");
  result = resolve_credentials_blocking(with_env(env));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCONTAINER");
  EXPECT_EQ(stub.seen().size(), 1u);  // asked only when nothing came before it
}

TEST(CredentialsChainOrder, AProfileWithoutKeysFallsThroughToTheContainer) {
  TempDir home;
  home.write(".aws/config", "[default]\nregion = eu-west-1\n");
  StubEndpoint stub({http_reply(200, credentials_json("AKIDCONTAINER", "2030-01-02T03:04:05Z"))});
  const auto result = resolve_credentials_blocking(
      with_env({{"HOME", home.path()}, {"AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.url("/creds")}}));
  ASSERT_TRUE(result.ok()) << result.error().detail;
  EXPECT_EQ(result.value().credentials.access_key_id, "AKIDCONTAINER");
}

// ---------------------------------------------------------------------------
// The pure pieces.

TEST(CredentialsTime, Iso8601ParsesUtcFractionsAndOffsetsAndRejectsTheRest) {
  EXPECT_EQ(parse_iso8601_ns("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_iso8601_ns("1970-01-01T00:00:01.5Z"), 1'500'000'000);
  EXPECT_EQ(parse_iso8601_ns("2016-02-25T06:03:31Z"), int64_t{1456380211} * 1'000'000'000);
  EXPECT_EQ(parse_iso8601_ns("2016-02-25T07:03:31+01:00"), parse_iso8601_ns("2016-02-25T06:03:31Z"));
  EXPECT_EQ(parse_iso8601_ns("2016-02-25T05:33:31-00:30"), parse_iso8601_ns("2016-02-25T06:03:31Z"));
  EXPECT_EQ(parse_iso8601_ns("2024-02-29T00:00:00.000000001Z"), *parse_iso8601_ns("2024-02-29T00:00:00Z") + 1);
  for (const char* bad : {"", "2016-02-25", "2016-02-25T06:03:31", "2016-02-25 06:03:31Z", "2023-02-29T00:00:00Z",
                          "2016-13-01T00:00:00Z", "2016-02-25T24:00:00Z", "2016-02-25T06:03:31.Z",
                          "2016-02-25T06:03:31Zjunk", "9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z"}) {
    EXPECT_FALSE(parse_iso8601_ns(bad).has_value()) << bad;
  }
}

TEST(CredentialsTime, RefreshFiveMinutesBeforeOrAtHalfTheTimeLeft) {
  CredentialsChainOptions options;
  const int64_t now = 1'000'000'000'000;
  const auto at = [now](Duration d) { return now + d.ns(); };
  EXPECT_EQ(credentials_refresh_delay(at(60_min), now, options), 55_min);
  EXPECT_EQ(credentials_refresh_delay(at(10_min), now, options), 5_min);
  EXPECT_EQ(credentials_refresh_delay(at(6_min), now, options), 3_min);
  EXPECT_EQ(credentials_refresh_delay(at(100_ms), now, options), options.refresh_delay_min);
  EXPECT_EQ(credentials_refresh_delay(at(-1_min), now, options), options.refresh_delay_min);  // already expired
}

}  // namespace
}  // namespace leaseproof::runtime

namespace leaseproof::runtime {
namespace {

std::string endpoint_of(std::string_view service, std::string_view flag, std::string_view region,
                        const Environment& environment) {
  auto resolved = resolve_service_endpoint(service, flag, region, environment);
  if (auto* error = std::get_if<std::string>(&resolved)) return "error: " + *error;
  const auto& endpoint = std::get<ServiceEndpoint>(resolved);
  return endpoint.url + " from " + endpoint.origin;
}

// The order AWS SDKs resolve an endpoint in: the explicit URL, the
// service's variable, the global one, then the region's host.
TEST(ServiceEndpoint, ExplicitThenServiceVariableThenGlobalVariableThenRegion) {
  Environment environment{{"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000"},
                          {"AWS_ENDPOINT_URL", "http://127.0.0.1:4566"}};
  EXPECT_EQ(endpoint_of("dynamodb", "https://ddb.example", "eu-west-1", environment),
            "https://ddb.example from --endpoint");
  EXPECT_EQ(endpoint_of("dynamodb", "", "eu-west-1", environment),
            "http://127.0.0.1:8000 from AWS_ENDPOINT_URL_DYNAMODB");
  EXPECT_EQ(endpoint_of("sqs", "", "eu-west-1", environment), "http://127.0.0.1:4566 from AWS_ENDPOINT_URL");
  EXPECT_EQ(endpoint_of("sqs", "", "eu-west-1", {}), "https://sqs.eu-west-1.amazonaws.com from region eu-west-1");
  EXPECT_EQ(endpoint_of("dynamodb", "", "cn-north-1", {}),
            "https://dynamodb.cn-north-1.amazonaws.com.cn from region cn-north-1");
  // An empty variable counts as unset, as in the SDKs.
  EXPECT_EQ(endpoint_of("sqs", "", "us-east-1", {{"AWS_ENDPOINT_URL_SQS", ""}}),
            "https://sqs.us-east-1.amazonaws.com from region us-east-1");
}

std::string endpoint_with(std::string_view service, const Environment& environment, const EndpointProfile& profile) {
  auto resolved = resolve_service_endpoint(service, "", "eu-west-1", environment, profile);
  if (auto* error = std::get_if<std::string>(&resolved)) return "error: " + *error;
  return std::get<ServiceEndpoint>(resolved).url + " from " + std::get<ServiceEndpoint>(resolved).origin;
}

// FIPS and dual-stack hosts as botocore's endpoint rules name them
// (botocore 1.43: dynamodb-fips.us-east-1.amazonaws.com,
// dynamodb.us-east-1.api.aws, dynamodb-fips.us-east-1.api.aws).
TEST(ServiceEndpoint, FipsAndDualStackFromTheEnvironmentOrTheProfile) {
  const EndpointProfile none;
  EXPECT_EQ(endpoint_with("dynamodb", {{"AWS_USE_FIPS_ENDPOINT", "true"}}, none),
            "https://dynamodb-fips.eu-west-1.amazonaws.com from region eu-west-1, FIPS");
  EXPECT_EQ(endpoint_with("sqs", {{"AWS_USE_DUALSTACK_ENDPOINT", "TRUE"}}, none),
            "https://sqs.eu-west-1.api.aws from region eu-west-1, dual-stack");
  EXPECT_EQ(endpoint_with("dynamodb", {{"AWS_USE_FIPS_ENDPOINT", "true"}, {"AWS_USE_DUALSTACK_ENDPOINT", "true"}}, none),
            "https://dynamodb-fips.eu-west-1.api.aws from region eu-west-1, FIPS, dual-stack");
  const EndpointProfile fips{"profile 'gov'", {{"use_fips_endpoint", "true"}}};
  EXPECT_EQ(endpoint_with("sts", {}, fips), "https://sts-fips.eu-west-1.amazonaws.com from region eu-west-1, FIPS");
  // The variable wins over the profile.
  EXPECT_EQ(endpoint_with("sts", {{"AWS_USE_FIPS_ENDPOINT", "false"}}, fips),
            "https://sts.eu-west-1.amazonaws.com from region eu-west-1");
  // A configured URL turns both off, as in botocore.
  EXPECT_EQ(endpoint_with("sqs", {{"AWS_USE_FIPS_ENDPOINT", "true"}, {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}}, none),
            "http://127.0.0.1:9 from AWS_ENDPOINT_URL");
  EXPECT_EQ(endpoint_with("sqs", {{"AWS_USE_FIPS_ENDPOINT", "yes"}}, none),
            "error: AWS_USE_FIPS_ENDPOINT: 'yes' is not true or false");
  auto gov = resolve_service_endpoint("dynamodb", "", "us-gov-west-1", {{"AWS_USE_FIPS_ENDPOINT", "true"}});
  ASSERT_TRUE(std::holds_alternative<ServiceEndpoint>(gov));
  EXPECT_EQ(std::get<ServiceEndpoint>(gov).url, "https://dynamodb.us-gov-west-1.amazonaws.com");
  gov = resolve_service_endpoint("sqs", "", "us-gov-west-1", {{"AWS_USE_FIPS_ENDPOINT", "true"}});
  ASSERT_TRUE(std::holds_alternative<std::string>(gov));
  EXPECT_TRUE(contains(std::get<std::string>(gov), "AWS_ENDPOINT_URL_SQS")) << std::get<std::string>(gov);
}

// The profile's endpoint_url comes after both variables; ignoring configured
// URLs (variable or profile) leaves the regional host; a profile's
// `services` section is refused rather than ignored.
TEST(ServiceEndpoint, TheProfilesEndpointUrlServicesAndIgnoringConfiguredUrls) {
  const EndpointProfile local{"profile 'local' in /h/.aws/config", {{"endpoint_url", "http://127.0.0.1:8000"}}};
  EXPECT_EQ(endpoint_with("dynamodb", {}, local),
            "http://127.0.0.1:8000 from endpoint_url of profile 'local' in /h/.aws/config");
  EXPECT_EQ(endpoint_with("dynamodb", {{"AWS_ENDPOINT_URL", "http://127.0.0.1:4566"}}, local),
            "http://127.0.0.1:4566 from AWS_ENDPOINT_URL");
  EXPECT_EQ(endpoint_with("dynamodb", {{"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"},
                                       {"AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:4566"}},
                          local),
            "https://dynamodb.eu-west-1.amazonaws.com from region eu-west-1");
  const EndpointProfile ignoring{"profile 'p'", {{"endpoint_url", "http://127.0.0.1:8000"},
                                                 {"ignore_configured_endpoint_urls", "true"}}};
  EXPECT_EQ(endpoint_with("sqs", {}, ignoring), "https://sqs.eu-west-1.amazonaws.com from region eu-west-1");
  // The explicit flag is never ignored.
  auto explicit_url = resolve_service_endpoint("sqs", "http://127.0.0.1:1", "eu-west-1", {}, ignoring);
  EXPECT_EQ(std::get<ServiceEndpoint>(explicit_url).url, "http://127.0.0.1:1");
  const EndpointProfile services{"profile 'p'", {{"services", "local-ddb"}}};
  const std::string refused = endpoint_with("dynamodb", {}, services);
  EXPECT_TRUE(contains(refused, "services = local-ddb")) << refused;
  EXPECT_TRUE(contains(refused, "AWS_ENDPOINT_URL_DYNAMODB")) << refused;
}

// endpoint_profile reads those keys of the chosen profile from the config file.
TEST(ServiceEndpoint, EndpointProfileReadsTheChosenProfilesKeys) {
  TempDir home;
  home.write(".aws/config", "[profile dev]\nendpoint_url = http://127.0.0.1:8000\nuse_fips_endpoint = true\n"
                            "region = eu-west-1\ns3 =\n  endpoint_url = http://127.0.0.1:9\n");
  auto options = with_env({{"HOME", home.path()}, {"AWS_PROFILE", "dev"}});
  const EndpointProfile profile = endpoint_profile(options);
  EXPECT_EQ(profile.keys.at("endpoint_url"), "http://127.0.0.1:8000");  // not the sub-property's
  EXPECT_EQ(profile.keys.at("use_fips_endpoint"), "true");
  EXPECT_FALSE(profile.keys.contains("region"));
  EXPECT_TRUE(contains(profile.name, "profile 'dev'")) << profile.name;
}

TEST(ServiceEndpoint, ARegionThatCouldNotNameAHostIsAnError) {
  for (const char* region : {"", "EU-WEST-1", "eu-west-1.evil.example", "-eu", "eu west"}) {
    EXPECT_EQ(endpoint_of("dynamodb", "", region, {}).rfind("error: region '", 0), 0u) << region;
  }
}

}  // namespace
}  // namespace leaseproof::runtime
