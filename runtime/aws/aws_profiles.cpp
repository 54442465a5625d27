// The credential chain's helpers, its shared config and credentials files,
// and the two sources that ask no server: the environment and a profile
// (credentials_internal.hpp says what the chain's files share).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "runtime/clock.hpp"
#include "runtime/aws/credentials_internal.hpp"

namespace leaseproof::runtime::credentials_internal {

// Small text helpers.

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return lower;
}

// The start of a body on one line, for error messages.
std::string excerpt(std::string_view body) {
  std::string start;
  for (const char c : body.substr(0, excerpt_bytes_max)) {
    if (!is_space(c)) start += c;
    else if (!start.empty() && start.back() != ' ') start += ' ';
  }
  if (body.size() > excerpt_bytes_max) start += "...";
  return start.empty() ? "(empty body)" : "'" + start + "'";
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (const auto& part : parts) {
    if (!joined.empty()) joined += separator;
    joined += part;
  }
  return joined;
}

std::string env_value(const Environment& env, std::string_view name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string{} : it->second;
}

Environment environment_of(const CredentialsChainOptions& options) {
  return options.environment ? *options.environment : process_environment();
}

int64_t wall_now(const CredentialsChainOptions& options) {
  return options.wall_clock_ns ? options.wall_clock_ns() : wall_now_ns();
}

// ---------------------------------------------------------------------------
// Files.

FileText read_small_file(const std::string& path, std::size_t bytes_max) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return {FileText::Status::missing, {}, {}};
  if (!std::filesystem::is_regular_file(status)) return {FileText::Status::failed, {}, "not a regular file"};
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return {FileText::Status::failed, {}, ec.message()};
  if (size > bytes_max) {
    return {FileText::Status::failed, {}, fmt::format("larger than {} bytes", bytes_max)};
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return {FileText::Status::failed, {}, "cannot be read"};
  return {FileText::Status::ok, text.str(), {}};
}

namespace {

// ---------------------------------------------------------------------------
// Shared config and credentials files (INI).

// The profile a section header names; nullopt for sections that hold no
// profile ([sso-session x], [services x], or a bare [x] in the config file).
std::optional<std::string> section_profile(std::string_view inside, bool config_file) {
  inside = trim(inside);
  if (inside.empty()) return std::nullopt;
  if (!config_file || inside == "default") return std::string(inside);
  constexpr std::string_view prefix = "profile";
  if (inside.size() > prefix.size() && inside.starts_with(prefix) && is_space(inside[prefix.size()])) {
    const auto name = trim(inside.substr(prefix.size()));
    if (!name.empty()) return std::string(name);
  }
  return std::nullopt;
}

// A '#' or ';' after whitespace starts a comment.
std::string_view strip_inline_comment(std::string_view text) {
  for (std::size_t i = 1; i < text.size(); ++i) {
    if ((text[i] == '#' || text[i] == ';') && is_space(text[i - 1])) return text.substr(0, i);
  }
  return text;
}

// Lines are "[section]", "key = value", comments ('#' or ';' first) or
// blank. An indented line after a property continues it (a sub-property such
// as "s3 =\n  max_concurrent_requests = 10") and is skipped. Keys are
// case-insensitive; a later value for the same profile and key wins.
Profiles parse_profiles(std::string_view text, bool config_file) {
  Profiles profiles;
  // A UTF-8 byte order mark (editors on Windows write one) is not part of the
  // first line: left there, "[default]" would not start with '['.
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  ProfileKeys* section = nullptr;  // null outside a profile section
  bool after_property = false;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const std::string_view trimmed = trim(line);
    if (trimmed.empty() || trimmed.front() == '#' || trimmed.front() == ';') continue;
    if (is_space(line.front()) && after_property) continue;
    after_property = false;
    if (trimmed.front() == '[') {
      const auto close = trimmed.find(']');
      const auto name = close == std::string_view::npos ? std::nullopt
                                                         : section_profile(trimmed.substr(1, close - 1), config_file);
      section = name ? &profiles[*name] : nullptr;
      continue;
    }
    const auto equals = trimmed.find('=');
    if (equals == std::string_view::npos || section == nullptr) continue;
    const auto key = lowercase(trim(trimmed.substr(0, equals)));
    if (key.empty()) continue;
    (*section)[key] = std::string(trim(strip_inline_comment(trimmed.substr(equals + 1))));
    after_property = true;
  }
  return profiles;
}

std::string shared_file_path(const Environment& env, std::string_view variable, std::string_view under_home) {
  const std::string home = env_value(env, "HOME");
  std::string path = env_value(env, variable);
  if (path.empty()) return home.empty() ? std::string{} : home + "/" + std::string(under_home);
  if (path.starts_with("~/") && !home.empty()) return home + path.substr(1);
  return path;
}

constexpr std::string_view credentials_variable = "AWS_SHARED_CREDENTIALS_FILE";
constexpr std::string_view credentials_under_home = ".aws/credentials";
constexpr std::string_view config_variable = "AWS_CONFIG_FILE";
constexpr std::string_view config_under_home = ".aws/config";

}  // namespace

SharedFile load_shared_file(const Environment& env, bool config_file, const CredentialsChainOptions& options) {
  SharedFile file;
  file.path = config_file ? shared_file_path(env, config_variable, config_under_home)
                          : shared_file_path(env, credentials_variable, credentials_under_home);
  if (file.path.empty()) return file;
  FileText read = read_small_file(file.path, options.profile_file_bytes_max);
  file.exists = read.status != FileText::Status::missing;
  if (read.status == FileText::Status::failed) file.problem = std::move(read.problem);
  if (read.status == FileText::Status::ok) file.profiles = parse_profiles(read.text, config_file);
  return file;
}

ProfileChoice choose_profile(const Environment& env, const CredentialsChainOptions& options) {
  if (!options.profile.empty()) return {options.profile, true};
  std::string from_env = env_value(env, "AWS_PROFILE");
  if (!from_env.empty()) return {std::move(from_env), true};
  return {"default", false};
}


// ---------------------------------------------------------------------------
// The sources. Each finds credentials, finds nothing (saying where it looked,
// for the final error), or fails.

SourceOutcome from_environment(const Environment& env) {
  const std::string key_id = env_value(env, "AWS_ACCESS_KEY_ID");
  const std::string secret = env_value(env, "AWS_SECRET_ACCESS_KEY");
  if (key_id.empty() && secret.empty()) return NotFound{"environment (AWS_ACCESS_KEY_ID not set)"};
  if (secret.empty()) {
    return CredentialsError{"environment: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"};
  }
  if (key_id.empty()) {
    return CredentialsError{"environment: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"};
  }
  return ResolvedCredentials{
      .credentials = {.access_key_id = key_id,
                      .secret_access_key = secret,
                      .session_token = env_value(env, "AWS_SESSION_TOKEN")},
      .origin = CredentialsOrigin::environment,
      .description = "environment",
      .expiration_wall_ns = std::nullopt,
  };
}

SourceOutcome from_profile(const Environment& env, const CredentialsChainOptions& options) {
  const ProfileChoice choice = choose_profile(env, options);
  const SharedFile credentials_file = load_shared_file(env, false, options);
  const SharedFile config_file = load_shared_file(env, true, options);
  bool profile_exists = false;
  // The credentials file first: for the same profile it wins. Key, secret and
  // token come from one file, never mixed.
  for (const SharedFile* file : {&credentials_file, &config_file}) {
    if (!file->problem.empty()) {
      return CredentialsError{fmt::format("shared file {}: {}", file->path, file->problem)};
    }
    const auto profile = file->profiles.find(choice.name);
    if (profile == file->profiles.end()) continue;
    profile_exists = true;
    const auto& keys = profile->second;
    const auto value = [&keys](const char* key) {
      const auto it = keys.find(key);
      return it == keys.end() ? std::string{} : it->second;
    };
    if (value("aws_access_key_id").empty()) continue;
    if (value("aws_secret_access_key").empty()) {
      return CredentialsError{fmt::format("profile '{}' in {} has aws_access_key_id but no aws_secret_access_key",
                                          choice.name, file->path)};
    }
    return ResolvedCredentials{
        .credentials = {.access_key_id = value("aws_access_key_id"),
                        .secret_access_key = value("aws_secret_access_key"),
                        .session_token = value("aws_session_token")},
        .origin = CredentialsOrigin::profile,
        .description = fmt::format("profile '{}' in {}", choice.name, file->path),
        .expiration_wall_ns = std::nullopt,
    };
  }
  const std::string files = fmt::format("{} or {}", credentials_file.describe(credentials_variable, credentials_under_home),
                                        config_file.describe(config_variable, config_under_home));
  if (!profile_exists && choice.named) {
    return CredentialsError{fmt::format("profile '{}' not found in {}", choice.name, files)};
  }
  if (!profile_exists) return NotFound{fmt::format("profile '{}' (not in {})", choice.name, files)};
  // A profile whose credentials come from a source leaseproof does not have
  // would give AWS SDKs other credentials than the next source here does.
  for (const SharedFile* file : {&credentials_file, &config_file}) {
    const auto profile = file->profiles.find(choice.name);
    if (profile == file->profiles.end()) continue;
    for (const char* key : {"role_arn", "credential_process", "sso_session", "sso_start_url", "web_identity_token_file"}) {
      if (profile->second.contains(key)) {
        return CredentialsError{fmt::format(
            "profile '{}' in {} takes its credentials from {}, which leaseproof does not support (supported: "
            "aws_access_key_id and aws_secret_access_key in the profile, the environment, the container endpoint)",
            choice.name, file->path, key)};
      }
    }
  }
  return NotFound{fmt::format(
      "profile '{}' (no aws_access_key_id in {}; role_arn, sso_* and credential_process are not supported)",
      choice.name, files)};
}

}  // namespace leaseproof::runtime::credentials_internal
