#include "env/object/environment.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "env/object/uri.h"

namespace weightlift {

Status ObjectStorageOptions::Validate() const {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument("object storage option " + what);
  };
  if (piece_bytes < (64u << 10) || piece_bytes > (1ull << 30)) {
    return bad("piece_bytes must be between 64 KiB and 1 GiB, got " +
               std::to_string(piece_bytes));
  }
  if (min_pieces_per_read < 1 || min_pieces_per_read > 64) {
    return bad("min_pieces_per_read must be 1..64, got " +
               std::to_string(min_pieces_per_read));
  }
  if (max_connections < 1 || max_connections > 1024) {
    return bad("max_connections must be 1..1024, got " +
               std::to_string(max_connections));
  }
  if (transport_threads < 1 || transport_threads > 64 ||
      transport_threads > max_connections) {
    return bad(
        "transport_threads must be 1..64 and at most max_connections, got " +
        std::to_string(transport_threads));
  }
  if (max_attempts < 1 || max_attempts > 100) {
    return bad("max_attempts must be 1..100, got " +
               std::to_string(max_attempts));
  }
  if (!(connect_timeout_seconds > 0) || !(stall_timeout_seconds >= 1) ||
      !(backoff_initial_seconds >= 0) ||
      !(backoff_max_seconds >= backoff_initial_seconds)) {
    return bad(
        "timeouts: connect_timeout_seconds > 0, stall_timeout_seconds >= 1, "
        "0 <= backoff_initial_seconds <= backoff_max_seconds");
  }
  if (open_prefetch_bytes > (64u << 20)) {
    return bad("open_prefetch_bytes must be at most 64 MiB, got " +
               std::to_string(open_prefetch_bytes));
  }
  if (!endpoint_url.empty()) {
    auto parts = internal::SplitUrl(endpoint_url);
    if (!parts.ok() || (parts->scheme != "http" && parts->scheme != "https")) {
      return bad("endpoint_url '" + internal::PrintableUrl(endpoint_url) +
                 "' is not an http:// or https:// URL");
    }
  }
  if (credentials.access_key_id.empty() !=
      credentials.secret_access_key.empty()) {
    return bad(
        "credentials: an access key id needs a secret access key and the "
        "other way round");
  }
  return Status::OK();
}

bool IsObjectStorageLocation(const std::string& location) {
  return internal::IsObjectUri(location);
}

StatusOr<ObjectStorageOptions> ObjectStorageOptionsFromEnvironment() {
  const char* home = std::getenv("HOME");
  return internal::ObjectStorageOptionsFrom(
      [](const char* name) -> const char* { return std::getenv(name); },
      home ? home : "");
}

}  // namespace weightlift

namespace weightlift::internal {
namespace {

std::string Trim(std::string_view v) {
  const size_t b = v.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const size_t e = v.find_last_not_of(" \t\r");
  return std::string(v.substr(b, e - b + 1));
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string Env(const GetEnvFn& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? std::string(v) : std::string();
}

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// "8MiB", "512KiB", "1048576" -> bytes.
bool ParseSize(const std::string& s, size_t* out) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return false;
  const std::string unit = Lower(Trim(end));
  unsigned long long mult = 1;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else if (unit == "k" || unit == "kib" || unit == "kb") {
    mult = 1ull << 10;
  } else if (unit == "m" || unit == "mib" || unit == "mb") {
    mult = 1ull << 20;
  } else if (unit == "g" || unit == "gib" || unit == "gb") {
    mult = 1ull << 30;
  } else {
    return false;
  }
  if (n > (~0ull) / mult) return false;
  *out = static_cast<size_t>(n * mult);
  return true;
}

}  // namespace

IniSections ParseAwsIni(const std::string& text) {
  IniSections out;
  std::string section, nested;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
    const std::string t = Trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = Trim(std::string_view(t).substr(1, t.size() - 2));
      nested.clear();
      out[section];
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == std::string::npos || section.empty()) continue;
    const std::string key = Lower(Trim(std::string_view(t).substr(0, eq)));
    const std::string value = Trim(std::string_view(t).substr(eq + 1));
    if (indented && !nested.empty()) {
      out[section][nested + "." + key] = value;
    } else if (value.empty()) {
      nested = key;  // "s3 =" opens a nested block
    } else {
      nested.clear();
      out[section][key] = value;
    }
  }
  return out;
}

StatusOr<ObjectStorageOptions> ObjectStorageOptionsFrom(
    const GetEnvFn& getenv, const std::string& home) {
  ObjectStorageOptions o;
  const std::string profile_env = Env(getenv, "AWS_PROFILE");
  const std::string profile = profile_env.empty() ? "default" : profile_env;

  std::string credentials_path = Env(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (credentials_path.empty() && !home.empty()) {
    credentials_path = home + "/.aws/credentials";
  }
  std::string config_path = Env(getenv, "AWS_CONFIG_FILE");
  if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";

  IniSections credentials_file, config_file;
  std::string text;
  if (!credentials_path.empty() && ReadText(credentials_path, &text)) {
    credentials_file = ParseAwsIni(text);
  }
  if (!config_path.empty() && ReadText(config_path, &text)) {
    config_file = ParseAwsIni(text);
  }
  // ~/.aws/credentials names profiles plainly; ~/.aws/config as
  // "[profile NAME]" except "[default]".
  const std::map<std::string, std::string>* cred_section = nullptr;
  const std::map<std::string, std::string>* config_section = nullptr;
  if (auto it = credentials_file.find(profile); it != credentials_file.end()) {
    cred_section = &it->second;
  }
  const std::string config_name =
      profile == "default" ? "default" : "profile " + profile;
  if (auto it = config_file.find(config_name); it != config_file.end()) {
    config_section = &it->second;
  }
  if (!profile_env.empty() && !cred_section && !config_section) {
    return Status::InvalidArgument(
        "AWS_PROFILE='" + profile_env + "': no such profile in " +
        (credentials_path.empty() ? "(no credentials file)"
                                  : credentials_path) +
        " or " + (config_path.empty() ? "(no config file)" : config_path));
  }
  auto from_profile = [&](const std::string& key) -> std::string {
    if (cred_section) {
      if (auto it = cred_section->find(key); it != cred_section->end()) {
        return it->second;
      }
    }
    if (config_section) {
      if (auto it = config_section->find(key); it != config_section->end()) {
        return it->second;
      }
    }
    return {};
  };

  // Credentials: the environment wins as a pair, then the profile.
  const std::string env_key = Env(getenv, "AWS_ACCESS_KEY_ID");
  const std::string env_secret = Env(getenv, "AWS_SECRET_ACCESS_KEY");
  if (!env_key.empty() && !env_secret.empty()) {
    o.credentials.access_key_id = env_key;
    o.credentials.secret_access_key = env_secret;
    o.credentials.session_token = Env(getenv, "AWS_SESSION_TOKEN");
    o.credentials_source = "environment (AWS_ACCESS_KEY_ID)";
  } else if (!from_profile("aws_access_key_id").empty()) {
    o.credentials.access_key_id = from_profile("aws_access_key_id");
    o.credentials.secret_access_key = from_profile("aws_secret_access_key");
    o.credentials.session_token = from_profile("aws_session_token");
    o.credentials_source = "profile '" + profile + "'";
    if (o.credentials.secret_access_key.empty()) {
      return Status::InvalidArgument("profile '" + profile +
                                     "' has aws_access_key_id but no "
                                     "aws_secret_access_key");
    }
  } else {
    o.credentials_source = "anonymous (no credentials found)";
  }

  if (std::string r = Env(getenv, "AWS_REGION"); !r.empty()) {
    o.region = r;
  } else if (std::string d = Env(getenv, "AWS_DEFAULT_REGION"); !d.empty()) {
    o.region = d;
  } else if (std::string p = from_profile("region"); !p.empty()) {
    o.region = p;
  }

  if (std::string e = Env(getenv, "AWS_ENDPOINT_URL_S3"); !e.empty()) {
    o.endpoint_url = e;
  } else if (std::string g = Env(getenv, "AWS_ENDPOINT_URL"); !g.empty()) {
    o.endpoint_url = g;
  } else if (std::string s = from_profile("s3.endpoint_url"); !s.empty()) {
    o.endpoint_url = s;
  } else if (std::string p = from_profile("endpoint_url"); !p.empty()) {
    o.endpoint_url = p;
  }
  while (!o.endpoint_url.empty() && o.endpoint_url.back() == '/') {
    o.endpoint_url.pop_back();
  }

  std::string addressing = Env(getenv, "WEIGHTLIFT_S3_ADDRESSING");
  if (addressing.empty()) addressing = from_profile("s3.addressing_style");
  addressing = Lower(addressing);
  if (addressing.empty() || addressing == "auto") {
    o.addressing = S3Addressing::kAuto;
  } else if (addressing == "path") {
    o.addressing = S3Addressing::kPath;
  } else if (addressing == "virtual") {
    o.addressing = S3Addressing::kVirtual;
  } else {
    return Status::InvalidArgument("S3 addressing style '" + addressing +
                                   "': expected auto, path or virtual");
  }

  // The limits, each WEIGHTLIFT_OBJECT_<NAME>.
  auto number = [&](const char* name, auto* field) -> Status {
    const std::string v = Env(getenv, name);
    if (v.empty()) return Status::OK();
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0') {
      return Status::InvalidArgument(std::string(name) + "='" + v +
                                     "': not a number");
    }
    *field = static_cast<std::remove_pointer_t<decltype(field)>>(d);
    return Status::OK();
  };
  auto size = [&](const char* name, size_t* field) -> Status {
    const std::string v = Env(getenv, name);
    if (v.empty()) return Status::OK();
    if (!ParseSize(v, field)) {
      return Status::InvalidArgument(std::string(name) + "='" + v +
                                     "': not a size (e.g. 8MiB)");
    }
    return Status::OK();
  };
  WL_RETURN_IF_ERROR(size("WEIGHTLIFT_OBJECT_PIECE_SIZE", &o.piece_bytes));
  WL_RETURN_IF_ERROR(
      size("WEIGHTLIFT_OBJECT_PREFETCH_SIZE", &o.open_prefetch_bytes));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_CONNECTIONS", &o.max_connections));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_MIN_PIECES", &o.min_pieces_per_read));
  WL_RETURN_IF_ERROR(number("WEIGHTLIFT_OBJECT_THREADS", &o.transport_threads));
  WL_RETURN_IF_ERROR(number("WEIGHTLIFT_OBJECT_MAX_ATTEMPTS", &o.max_attempts));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_CONNECT_TIMEOUT", &o.connect_timeout_seconds));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_STALL_TIMEOUT", &o.stall_timeout_seconds));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_BACKOFF_INITIAL", &o.backoff_initial_seconds));
  WL_RETURN_IF_ERROR(
      number("WEIGHTLIFT_OBJECT_BACKOFF_MAX", &o.backoff_max_seconds));
  if (std::string v = Env(getenv, "AWS_CA_BUNDLE"); !v.empty()) {
    o.ca_bundle = v;
  }
  if (std::string v = Lower(Env(getenv, "WEIGHTLIFT_OBJECT_VERIFY_TLS"));
      v == "0" || v == "false" || v == "no") {
    o.verify_tls = false;
  }
  WL_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace weightlift::internal
