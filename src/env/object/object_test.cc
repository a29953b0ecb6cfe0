// Unit tests of the object-storage pieces that need no server: URIs, SigV4
// against the published AWS example, the credential chain on real files,
// backoff, XML. The server tests are tests/object (real SeaweedFS).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "env/object/environment.h"
#include "env/object/remote_object.h"
#include "env/object/s3.h"
#include "env/object/sigv4.h"
#include "env/object/uri.h"

namespace weightlift::internal {
namespace {

TEST(ObjectUri, ParsesS3AndHttp) {
  auto a = ParseObjectUri("s3://my-bucket/models/llama/model.safetensors");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->kind, ObjectUri::Kind::kS3);
  EXPECT_EQ(a->bucket, "my-bucket");
  EXPECT_EQ(a->key, "models/llama/model.safetensors");
  auto b = ParseObjectUri("S3://bkt/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->key, "");
  auto c =
      ParseObjectUri("https://host:8443/a/b.safetensors?X-Amz-Signature=s");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, ObjectUri::Kind::kHttp);
  EXPECT_FALSE(ParseObjectUri("s3://x/k").ok());  // bucket too short
  EXPECT_FALSE(ParseObjectUri("s3://a_b?c/k").ok());
  EXPECT_FALSE(ParseObjectUri("https:///path").ok());  // no host
  EXPECT_FALSE(ParseObjectUri("/local/path").ok());
  EXPECT_TRUE(IsObjectUri("HTTPS://x/y"));
  EXPECT_FALSE(IsObjectUri("s3:/x"));
}

TEST(ObjectUri, PrintableUrlDropsQueryAndUserInfo) {
  EXPECT_EQ(PrintableUrl("https://u:secret@h:1/p/q?X-Amz-Signature=abc#f"),
            "https://h:1/p/q");
  EXPECT_EQ(PrintableUrl("http://h/p"), "http://h/p");
  EXPECT_EQ(PrintableUrl("http://h?x=1"), "http://h");
}

TEST(ObjectUri, EncodesLikeSigV4) {
  EXPECT_EQ(UriEncode("a b/c~d_e.f-g+h", true), "a%20b/c~d_e.f-g%2Bh");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("\xc3\xa9", true), "%C3%A9");
}

// The example of the S3 documentation, "Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk", GET Object
// with a Range header; its published signature is below.
TEST(SigV4, MatchesTheAwsGetObjectExample) {
  SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.canonical_uri = "/test.txt";
  r.extra_signed_headers = {{"range", "bytes=0-9"}};
  r.payload_hash = Sha256Hex("");
  ObjectStorageCredentials c;
  c.access_key_id = "AKIAIOSFODNN7EXAMPLE";
  c.secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  std::tm tm{};
  tm.tm_year = 2013 - 1900;
  tm.tm_mon = 4;
  tm.tm_mday = 24;
  const std::time_t when = timegm(&tm);
  auto headers = SignV4(r, c, "us-east-1", "s3", when);
  ASSERT_EQ(headers.size(), 3u);
  EXPECT_EQ(headers[0], "x-amz-date: 20130524T000000Z");
  EXPECT_EQ(headers[2],
            "Authorization: AWS4-HMAC-SHA256 "
            "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature="
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  for (const auto& h : headers) {
    EXPECT_EQ(h.find(c.secret_access_key), std::string::npos);
  }
  c.session_token = "TOKEN";
  auto with_token = SignV4(r, c, "us-east-1", "s3", when);
  ASSERT_EQ(with_token.size(), 4u);
  EXPECT_EQ(with_token[2], "x-amz-security-token: TOKEN");
  EXPECT_NE(with_token[3].find("x-amz-security-token"), std::string::npos);
}

class TempHome {
 public:
  TempHome() {
    dir_ = std::filesystem::temp_directory_path() /
           ("wl-object-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(counter_++));
    std::filesystem::create_directories(dir_ / ".aws");
  }
  ~TempHome() { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / ".aws" / name) << text;
  }
  std::string path() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
};

GetEnvFn FakeEnv(std::map<std::string, std::string> vars) {
  auto owned =
      std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

TEST(Credentials, AnonymousWhenNothingIsSet) {
  TempHome home;
  auto o = ObjectStorageOptionsFrom(FakeEnv({}), home.path());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->credentials.anonymous());
  EXPECT_EQ(o->region, "us-east-1");
  EXPECT_EQ(o->endpoint_url, "");
}

TEST(Credentials, EnvironmentWinsOverFiles) {
  TempHome home;
  home.Write("credentials",
             "[default]\naws_access_key_id = FILEKEY\n"
             "aws_secret_access_key = filesecret\n");
  auto o = ObjectStorageOptionsFrom(
      FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVKEY"},
               {"AWS_SECRET_ACCESS_KEY", "envsecret"},
               {"AWS_SESSION_TOKEN", "tok"},
               {"AWS_DEFAULT_REGION", "eu-west-1"},
               {"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"},
               {"AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9001/"}}),
      home.path());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->credentials.access_key_id, "ENVKEY");
  EXPECT_EQ(o->credentials.session_token, "tok");
  EXPECT_EQ(o->region, "eu-west-1");
  EXPECT_EQ(o->endpoint_url, "http://127.0.0.1:9001");  // _S3 wins, no '/'
}

TEST(Credentials, ProfileFromBothFiles) {
  TempHome home;
  home.Write("credentials",
             "# comment\n[default]\naws_access_key_id=D\n"
             "aws_secret_access_key=d\n\n[dev]\n"
             "aws_access_key_id = DEVKEY\naws_secret_access_key = devsecret\n");
  home.Write("config",
             "[default]\nregion = us-west-2\n[profile dev]\n"
             "region = ap-south-1\nendpoint_url = https://minio.local:9000\n"
             "s3 =\n  addressing_style = path\n");
  auto o = ObjectStorageOptionsFrom(
      FakeEnv({{"AWS_PROFILE", "dev"}, {"AWS_REGION", ""}}), home.path());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->credentials.access_key_id, "DEVKEY");
  EXPECT_EQ(o->credentials.secret_access_key, "devsecret");
  EXPECT_EQ(o->region, "ap-south-1");
  EXPECT_EQ(o->endpoint_url, "https://minio.local:9000");
  EXPECT_EQ(o->addressing, S3Addressing::kPath);
  EXPECT_EQ(o->credentials_source, "profile 'dev'");

  auto d = ObjectStorageOptionsFrom(FakeEnv({{"AWS_REGION", "sa-east-1"}}),
                                    home.path());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->credentials.access_key_id, "D");
  EXPECT_EQ(d->region, "sa-east-1");
}

TEST(Credentials, MissingProfileIsAnErrorWithoutSecrets) {
  TempHome home;
  home.Write("credentials",
             "[default]\naws_access_key_id=K\naws_secret_access_key=s3cr3t\n");
  auto o =
      ObjectStorageOptionsFrom(FakeEnv({{"AWS_PROFILE", "nope"}}), home.path());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(o.status().message().find("s3cr3t"), std::string::npos);
}

TEST(Credentials, SharedFileVariablesAndLimits) {
  TempHome home;
  home.Write("elsewhere",
             "[default]\naws_access_key_id=K2\naws_secret_access_key=s2\n");
  auto o = ObjectStorageOptionsFrom(
      FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", home.path() + "/.aws/elsewhere"},
               {"WEIGHTLIFT_OBJECT_PIECE_SIZE", "4MiB"},
               {"WEIGHTLIFT_OBJECT_CONNECTIONS", "32"},
               {"WEIGHTLIFT_OBJECT_MAX_ATTEMPTS", "3"}}),
      "");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->credentials.access_key_id, "K2");
  EXPECT_EQ(o->piece_bytes, 4u << 20);
  EXPECT_EQ(o->max_connections, 32);
  EXPECT_EQ(o->max_attempts, 3);
  auto bad = ObjectStorageOptionsFrom(
      FakeEnv({{"WEIGHTLIFT_OBJECT_PIECE_SIZE", "1"}}), "");
  EXPECT_FALSE(bad.ok());
  auto bad2 = ObjectStorageOptionsFrom(
      FakeEnv({{"WEIGHTLIFT_OBJECT_CONNECTIONS", "many"}}), "");
  EXPECT_FALSE(bad2.ok());
}

TEST(Retry, BackoffIsCappedExponentialWithFullJitter) {
  RetryPolicy p{8, 0.1, 1.0};
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 2, 1.0), 0.1);
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 3, 1.0), 0.2);
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 5, 1.0), 0.8);
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 6, 1.0), 1.0);   // capped
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 60, 1.0), 1.0);  // no overflow
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 4, 0.5), 0.2);
  EXPECT_DOUBLE_EQ(BackoffSeconds(p, 4, 0.0), 0.0);
}

TEST(S3, XmlUnescape) {
  EXPECT_EQ(XmlUnescape("a&amp;b&lt;&gt;&quot;&apos;&#34;&#x41;&#233;"),
            "a&b<>\"'\"A\xc3\xa9");
  EXPECT_EQ(XmlUnescape("no entities"), "no entities");
}

TEST(S3, PathAndVirtualHostedUrls) {
  auto t = Transport::Create({});
  ASSERT_TRUE(t.ok());
  ObjectStorageOptions o;
  o.region = "eu-central-1";
  S3Client aws(*t, o);
  EXPECT_EQ(
      PrintableUrl(aws.Target("my-bucket", "a b/c.safetensors").url),
      "https://my-bucket.s3.eu-central-1.amazonaws.com/a%20b/c.safetensors");
  S3Client dotted(*t, o);
  EXPECT_EQ(dotted.Target("my.bucket", "k").url,
            "https://s3.eu-central-1.amazonaws.com/my.bucket/k");
  o.endpoint_url = "http://127.0.0.1:8333";
  S3Client local(*t, o);
  EXPECT_EQ(local.Target("models", "x/y").url,
            "http://127.0.0.1:8333/models/x/y");
  o.addressing = S3Addressing::kVirtual;
  S3Client forced(*t, o);
  EXPECT_EQ(forced.Target("models", "x").url, "http://models.127.0.0.1:8333/x");
}

}  // namespace
}  // namespace weightlift::internal
