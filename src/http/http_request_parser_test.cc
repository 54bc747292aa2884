#include "http/http_request_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tokenmill::http {
namespace {

using State = HttpRequestParser::State;

// What one parse of one input came to; equal for every way of splitting it.
struct Outcome {
  State state = State::kHead;
  size_t consumed = 0;
  bool head_complete = false;
  int status = 0;
  std::string message;
  ParsedRequest request;  // taken when complete
};

// Everything observable about an outcome, to compare two of them.
std::string describe(const Outcome& o) {
  const ParsedRequest& r = o.request;
  std::string s = std::to_string(static_cast<int>(o.state)) + " " + std::to_string(o.consumed) + " " +
                  std::to_string(o.head_complete) + " " + std::to_string(o.status) + " " + o.message + "\n" + r.method +
                  " " + r.target + " " + r.path + " " + r.query + " " + std::to_string(r.version_minor) +
                  std::to_string(r.keep_alive) + std::to_string(r.expects_continue);
  for (const auto& [name, value] : r.headers) s += "\n" + name + ":" + value;
  return s + "\n\n" + r.body;
}

// Feeds `input` cut at `cuts` (sorted offsets), stopping where the parser
// stops taking bytes.
Outcome parse_split(std::string_view input, const std::vector<size_t>& cuts, HttpLimits limits) {
  HttpRequestParser p(limits);
  Outcome o;
  size_t start = 0;
  for (size_t k = 0; k <= cuts.size(); ++k) {
    const size_t end = k < cuts.size() ? cuts[k] : input.size();
    const std::string_view piece = input.substr(start, end - start);
    const size_t used = p.feed(piece);
    EXPECT_LE(used, piece.size());
    o.consumed += used;
    if (used < piece.size()) break;
    start = end;
  }
  o.state = p.state();
  o.head_complete = p.head_complete();
  o.status = p.error_status();
  o.message = p.error_message();
  if (o.state == State::kComplete) o.request = p.take();
  return o;
}

// Parses in one piece, byte by byte and in random pieces; all must agree.
Outcome parse(std::string_view input, HttpLimits limits = {}) {
  const Outcome whole = parse_split(input, {}, limits);
  std::vector<size_t> every;
  for (size_t i = 1; i < input.size(); ++i) every.push_back(i);
  EXPECT_EQ(describe(whole), describe(parse_split(input, every, limits))) << "byte by byte";
  std::mt19937 rng(static_cast<uint32_t>(input.size()));
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < input.size(); ++i)
      if (rng() % 5 == 0) cuts.push_back(i);
    EXPECT_EQ(describe(whole), describe(parse_split(input, cuts, limits))) << "random split " << trial;
  }
  return whole;
}

// Also used on a prefix that is already an error though more bytes could
// follow: the parser must not wait for them.
void expect_error(std::string_view input, int status, HttpLimits limits = {}) {
  const Outcome o = parse(input, limits);
  EXPECT_EQ(o.state, State::kError) << input;
  EXPECT_EQ(o.status, status) << input << " -> " << o.message;
  EXPECT_FALSE(o.message.empty());
}

// The error is found at the byte `at` (1-based: `at` bytes were taken).
void expect_error_at(std::string_view input, int status, size_t at, HttpLimits limits = {}) {
  const Outcome o = parse(input, limits);
  EXPECT_EQ(o.status, status) << input << " -> " << o.message;
  EXPECT_EQ(o.consumed, at) << input;
}

Outcome expect_complete(std::string_view input, HttpLimits limits = {}) {
  Outcome o = parse(input, limits);
  EXPECT_EQ(o.state, State::kComplete) << input << " -> " << o.message;
  EXPECT_EQ(o.consumed, input.size());
  return o;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string chunked_post(std::string_view body_part) {
  return "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(body_part);
}

TEST(HttpRequestParser, SimpleGet) {
  const Outcome o = expect_complete("GET /v1/models?a=1&b=%20 HTTP/1.1\r\nHost: localhost:8080\r\nAccept: */*\r\n\r\n");
  const ParsedRequest& r = o.request;
  EXPECT_EQ(r.method + " " + r.target + " " + r.path + " " + r.query, "GET /v1/models?a=1&b=%20 /v1/models a=1&b=%20");
  EXPECT_EQ(r.version_minor, 1);
  ASSERT_EQ(o.request.headers.size(), 2u);
  EXPECT_EQ(o.request.headers[0], (std::pair<std::string, std::string>("Host", "localhost:8080")));
  EXPECT_EQ(o.request.header("ACCEPT"), "*/*");
  EXPECT_TRUE(r.has_header("accept") && !r.has_header("Content-Length") && r.header("Content-Length").empty());
  EXPECT_TRUE(r.body.empty() && r.keep_alive && !r.expects_continue);
}

TEST(HttpRequestParser, MethodIsCaseSensitiveAndAnyToken) {
  EXPECT_EQ(expect_complete("get / HTTP/1.1\r\nHost: h\r\n\r\n").request.method, "get");
  EXPECT_EQ(expect_complete("X-CUSTOM!~ / HTTP/1.1\r\nHost: h\r\n\r\n").request.method, "X-CUSTOM!~");
}

TEST(HttpRequestParser, PostWithContentLength) {
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world";
  EXPECT_EQ(expect_complete(post).request.body, "hello world");
  // Zero is a complete request at the end of the head.
  EXPECT_EQ(expect_complete("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n").request.body, "");
}

TEST(HttpRequestParser, NoFramingHeaderMeansEmptyBody) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\n\r\n";
  const Outcome o = parse(head + "trailing bytes");
  EXPECT_EQ(o.state, State::kComplete);
  EXPECT_EQ(o.consumed, head.size());
  EXPECT_EQ(o.request.body, "");
}

TEST(HttpRequestParser, ChunkedWithExtensionsAndTrailers) {
  const Outcome o =
      expect_complete(chunked_post("5;name=value;q=\"x y\"\r\nhello\r\n6 ; ext\r\n world\r\nA\r\n0123456789\r\n"
                                   "0\r\nTrailer-One: 1\r\nX-Checksum: abc\r\n\r\n"));
  EXPECT_EQ(o.request.body, "hello world0123456789");
  EXPECT_FALSE(o.request.has_header("X-Checksum"));  // trailers are dropped
  EXPECT_EQ(expect_complete(chunked_post("0\r\n\r\n")).request.body, "");
  EXPECT_EQ(expect_complete(chunked_post("00a\r\n0123456789\r\n0\r\n\r\n")).request.body, "0123456789");
}

TEST(HttpRequestParser, PipelinedRequestsStayWithCaller) {
  const std::string first = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
  const Outcome o = parse(first + second);
  EXPECT_EQ(o.state, State::kComplete);
  EXPECT_EQ(o.consumed, first.size());
  EXPECT_EQ(o.request.body, "abc");
  HttpRequestParser p;
  std::string in = first + second;
  in.erase(0, p.feed(in));
  EXPECT_EQ(p.feed("more"), 0u);  // nothing after a complete request
  EXPECT_EQ(p.take().path, "/a");
  EXPECT_EQ(p.state(), State::kHead);
  p.reset();
  EXPECT_EQ(p.feed(in), second.size());
  ASSERT_EQ(p.state(), State::kComplete);
  EXPECT_EQ(p.take().path, "/b");
}

TEST(HttpRequestParser, BareLfEndsLines) {
  const Outcome o = expect_complete("POST /x HTTP/1.1\nHost: h\nContent-Length: 2\n\nok");
  EXPECT_EQ(o.request.header("Host"), "h");
  EXPECT_EQ(o.request.body, "ok");
  EXPECT_EQ(expect_complete(chunked_post("2\nok\n0\n\n")).request.body, "ok");
}

TEST(HttpRequestParser, BareCrIsAnError) {
  for (const std::string& bad : std::vector<std::string>{
           "GET / HTTP/1.1\rX", "GET / HTTP/1.1\r\nHost: h\rX", "GET / HTTP/1.1\r\nHost: h\r\n\rX", "\rX", "GET /\r",
           chunked_post("2\rok\r\n0\r\n\r\n"), chunked_post("2\r\nok\rX"), chunked_post("0\r\nA: b\rX")}) {
    expect_error(bad, 400);
  }
}

TEST(HttpRequestParser, LeadingEmptyLinesSkippedUpToBound) {
  std::string ok;
  for (size_t i = 0; i < kMaxLeadingEmptyLines; ++i) ok += i % 2 ? "\n" : "\r\n";
  EXPECT_EQ(expect_complete(ok + "GET / HTTP/1.1\r\nHost: h\r\n\r\n").request.path, "/");
  expect_error(ok + "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400);
}

TEST(HttpRequestParser, MalformedRequestLineFailsAtOnce) {
  // Non-tchar method bytes, no method, two SPs, HT as separator, target
  // bytes outside RFC 3986 ('#': fragments are never sent), a target that
  // is not '/', '*' or a scheme, a version that is not "HTTP/".
  for (const char* bad : {"G(", "\x01", " GET", "GET  /", "GET\t/", "GET /a\x01", "GET /a b", "GET /a#f", "GET /\x80",
                          "GET /[", "GET 1", "GET / HTTP/1.1 ", "GET / http/"}) {
    expect_error(bad, 400);
  }
}

// "path|query" of "<method> <target> HTTP/1.1" with a Host.
std::string path_and_query(const std::string& method_and_target) {
  const Outcome o = expect_complete(method_and_target + " HTTP/1.1\r\nHost: h\r\n\r\n");
  return o.request.path + "|" + o.request.query;
}

TEST(HttpRequestParser, TargetForms) {
  EXPECT_EQ(path_and_query("OPTIONS *"), "*|");
  EXPECT_EQ(path_and_query("GET http://example.com:80/v1/models?x=1"), "/v1/models|x=1");
  EXPECT_EQ(path_and_query("GET HTTPS://[::1]:8080"), "/|");
  EXPECT_EQ(path_and_query("GET http://h?q"), "/|q");
  EXPECT_EQ(expect_complete("GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n").request.target, "http://h/a");
  expect_error("GET *", 400);
  expect_error("OPTIONS */", 400);
  // Userinfo, not http(s), no "//", no host, brackets outside the authority,
  // authority-form.
  for (const char* bad :
       {"GET http://user@h/", "GET ftp://h/", "GET http:/h/", "GET http:///p", "GET http://h/[x]", "CONNECT h:443"}) {
    expect_error(std::string(bad) + " HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  }
}

TEST(HttpRequestParser, PathIsPercentDecodedQueryIsRaw) {
  EXPECT_EQ(path_and_query("GET /a%20b/%41%2f%c3%a9?x=%20%00"), "/a b/A/\xc3\xa9|x=%20%00");
  EXPECT_EQ(path_and_query("GET /?"), "/|");
  EXPECT_EQ(path_and_query("GET /a?b?c"), "/a|b?c");
  for (const char* bad : {"/a%00b", "/a%G1", "/a%4", "/a%", "/a%%41"}) {
    expect_error("GET " + std::string(bad) + " HTTP/1.1\r\nHost: h\r\n\r\n", 400);
  }
}

TEST(HttpRequestParser, Versions) {
  EXPECT_EQ(expect_complete("GET / HTTP/1.0\r\n\r\n").request.version_minor, 0);
  for (const char* v : {"2.0", "1.2", "0.9"}) expect_error("GET / HTTP/" + std::string(v) + "\r\nHost: h\r\n\r\n", 505);
  for (const char* bad : {"HTTP/1.1x", "HTTP/11", "HTTP/1.1 ", "HTTP/1", "HTTP/1.a"}) {
    expect_error("GET / " + std::string(bad) + "\r\nHost: h\r\n\r\n", 400);
  }
  expect_error("GET /\r\n\r\n", 400);  // HTTP/0.9 style, without a version
  // The status is decided when the line ends, so the error comes with the LF.
  expect_error_at("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, std::string("GET / HTTP/2.0\r\n").size());
}

TEST(HttpRequestParser, HeadTooLargeFailsAsSoonAsExceeded) {
  const HttpLimits limits{.max_head_bytes = 64};
  const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(32, 'a') + "\r\n\r\n";
  ASSERT_EQ(head.size(), 64u);
  expect_complete(head, limits);  // exactly at the limit
  expect_error_at("GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(1000, 'a'), 431, 65, limits);
  // A long request line counts too, and leading empty lines.
  EXPECT_EQ(parse("GET /" + std::string(100, 'a'), limits).status, 431);
  EXPECT_EQ(parse("\r\n" + head, limits).status, 431);
}

TEST(HttpRequestParser, TooManyHeaders) {
  const HttpLimits limits{.max_headers = 3};
  expect_complete("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits);
  const std::string prefix = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n";
  expect_error_at(prefix + "C: 3\r\n\r\n", 431, prefix.size() + 1, limits);  // the fourth name's first byte
}

TEST(HttpRequestParser, FieldSyntax) {
  const std::string line = "GET / HTTP/1.1\r\nHost: h\r\n";
  // Whitespace before the colon, obs-fold, a non-token or empty name, no
  // colon, control characters in the value.
  for (std::string bad : {"Name : v", "Name\t: v", " folded", "\tfolded", "Na(me: v", ": v", "NoColon\r", "A: x\x01",
                          "A: x\x7f", "A: x\x1b"}) {
    expect_error(line + bad, 400);
  }
  expect_error("GET / HTTP/1.1\r\n\tHost: h", 400);
  expect_error(line + std::string("A: x\0y", 6), 400);
  expect_error(line + "A: v\r\n folded\r\n\r\n", 400);
}

TEST(HttpRequestParser, FieldValuesTrimmed) {
  const Outcome o =
      expect_complete("GET / HTTP/1.1\r\nHost:h\r\nA:   spaced \t value \t \r\nB:\r\nC: \t \r\nD: caf\xc3\xa9\r\n\r\n");
  // Inner whitespace and obs-text are kept.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"Host", "h"}, {"A", "spaced \t value"}, {"B", ""}, {"C", ""}, {"D", "caf\xc3\xa9"}};
  EXPECT_EQ(o.request.headers, expected);
}

TEST(HttpRequestParser, TransferEncodingWithContentLengthIsSmuggling) {
  expect_error("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
  expect_error("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", 400);
  // HTTP/1.0 has no chunked coding; its framing is untrustworthy.
  expect_error("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
}

TEST(HttpRequestParser, TransferCodings) {
  const auto with_te = [](std::string_view te) {
    return "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: " + std::string(te) + "\r\n\r\n0\r\n\r\n";
  };
  expect_error(with_te("gzip, chunked"), 501);
  expect_error("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               501);
  // chunked must be final (RFC 9112 §6.3), once, without parameters.
  for (const char* bad : {"gzip", "chunked, gzip", "chunked, chunked", "chunked;x=1", ""})
    expect_error(with_te(bad), 400);
  expect_complete(with_te("chunked ,"));  // empty list elements are allowed
  expect_complete(with_te("CHUNKED"));
}

TEST(HttpRequestParser, ContentLengthValues) {
  const auto with_cl = [](std::string_view cl) {
    return "POST / HTTP/1.1\r\nHost: h\r\n" + std::string(cl) + "\r\n\r\nabc";
  };
  EXPECT_EQ(expect_complete(with_cl("Content-Length: 3\r\ncontent-length: 003")).request.body, "abc");
  EXPECT_EQ(expect_complete(with_cl("Content-Length: 3, 3")).request.body, "abc");
  // Conflicting values, signs, hex, spaces, empty, 2^64 and beyond.
  for (const char* bad : {"3\r\nContent-Length: 2", "3, 2", "+3", "-1", "0x3", "3 3", "", "3,", "18446744073709551616",
                          "99999999999999999999999"}) {
    expect_error(with_cl("Content-Length: " + std::string(bad)), 400);
  }
  expect_error(with_cl("Content-Length: 18446744073709551615"), 413);  // fits, too big
}

TEST(HttpRequestParser, ContentLengthOverLimitBeforeAnyBodyByte) {
  const HttpLimits limits{.max_body_bytes = 10};
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
  expect_error_at(head + std::string(11, 'x'), 413, head.size(), limits);
  const std::string at_limit = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n" + std::string(10, 'x');
  EXPECT_EQ(expect_complete(at_limit, limits).request.body.size(), 10u);
}

TEST(HttpRequestParser, ChunkDataMustEndWithCrlf) {
  const size_t data_end = chunked_post("2\r\nok").size();
  expect_error_at(chunked_post("2\r\nokX\r\n0\r\n\r\n"), 400, data_end + 1);
  expect_error_at(chunked_post("2\r\nok\r0\r\n\r\n"), 400, data_end + 2);
}

TEST(HttpRequestParser, ChunkedBodyOverLimitAtTheSizeDigit) {
  const HttpLimits limits{.max_body_bytes = 20};
  EXPECT_EQ(
      expect_complete(chunked_post("a\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n"), limits).request.body.size(),
      20u);
  const std::string before = chunked_post("a\r\n0123456789\r\n");
  expect_error_at(before + "b\r\n01234567890\r\n0\r\n\r\n", 413, before.size() + 1, limits);
  // A size that needs more digits fails at the digit that makes it too big.
  expect_error_at(chunked_post("000015"), 413, chunked_post("000015").size(), limits);
  expect_error_at(chunked_post("ffffffffffffffffffffffff\r\n"), 413, chunked_post("ff").size(), limits);
}

TEST(HttpRequestParser, ChunkSizeLineSyntax) {
  // Signs, leading spaces, "0x", no digits, whitespace not before ';' (BWS),
  // control characters in an extension.
  for (const char* bad : {"-1", "+1", " 1", "0x1", "", "g", "1 ", "1;a\x01", "1\t"}) {
    expect_error(chunked_post(std::string(bad) + "\r\nx\r\n0\r\n\r\n"), 400);
  }
  expect_complete(chunked_post("1\t; a = b\r\nx\r\n0;last\r\n\r\n"));
}

TEST(HttpRequestParser, ChunkSizeLineIsBounded) {
  const std::string ext(kMaxChunkLineBytes, 'e');
  const std::string fits = "1;" + std::string(kMaxChunkLineBytes - 4, 'e') + "\r\n";
  ASSERT_EQ(fits.size(), kMaxChunkLineBytes);
  expect_complete(chunked_post(fits + "x\r\n0\r\n\r\n"));
  expect_error_at(chunked_post("1;" + ext), 400, chunked_post("").size() + kMaxChunkLineBytes + 1);
  expect_error(chunked_post(std::string(kMaxChunkLineBytes + 1, '0') + "\r\n\r\n"), 400);
}

TEST(HttpRequestParser, TrailersUseWhatIsLeftOfTheHeadBudget) {
  const HttpLimits limits{.max_head_bytes = 100};
  const std::string head = chunked_post("");  // 61 bytes
  ASSERT_LT(head.size(), 100u);
  const std::string trailer = "T: " + std::string(100 - head.size() - 7, 'v') + "\r\n\r\n";
  expect_complete(head + "0\r\n" + trailer, limits);
  expect_error_at(head + "0\r\nT: " + std::string(200, 'v'), 431, 104, limits);  // 3: "0\r\n"
  expect_error(chunked_post("0\r\n folded\r\n\r\n"), 400);
  expect_error(chunked_post("0\r\nBad Name: v\r\n\r\n"), 400);
}

TEST(HttpRequestParser, HostRules) {
  expect_error("GET / HTTP/1.1\r\n\r\n", 400);
  expect_error("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400);
  expect_error("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400);
  expect_complete("GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(expect_complete("GET / HTTP/1.1\r\nHost:\r\n\r\n").request.header("Host"), "");
}

TEST(HttpRequestParser, KeepAlive) {
  EXPECT_TRUE(expect_complete("GET / HTTP/1.1\r\nHost: h\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(expect_complete("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(expect_complete("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade, close\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(expect_complete("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(expect_complete("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(
      expect_complete("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n").request.keep_alive);
}

TEST(HttpRequestParser, ExpectContinue) {
  EXPECT_TRUE(expect_complete("POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n\r\n").request.expects_continue);
  EXPECT_FALSE(expect_complete("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").request.expects_continue);
  EXPECT_FALSE(expect_complete("POST / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n").request.expects_continue);
}

TEST(HttpRequestParser, HeadCompleteBeforeTheBody) {
  HttpRequestParser p;
  EXPECT_EQ(p.state(), State::kHead);
  p.feed("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n");
  EXPECT_FALSE(p.head_complete());
  EXPECT_EQ(p.state(), State::kHead);
  p.feed("\r\nab");
  EXPECT_TRUE(p.head_complete());
  EXPECT_EQ(p.state(), State::kBody);
  // What the connection needs to send "100 Continue" before the body.
  EXPECT_TRUE(p.request().expects_continue);
  EXPECT_EQ(p.request().path, "/x");
  EXPECT_EQ(p.request().body, "ab");
  EXPECT_EQ(p.feed("cdeGET"), 3u);
  EXPECT_EQ(p.state(), State::kComplete);
  // Trailers belong to the body phase too.
  HttpRequestParser q;
  q.feed(chunked_post("0\r\nT: 1\r\n"));
  EXPECT_EQ(q.state(), State::kBody);
}

TEST(HttpRequestParser, TakeResetsForTheNextRequest) {
  HttpRequestParser p;
  p.feed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx");
  EXPECT_EQ(p.take().body, "x");
  EXPECT_FALSE(p.head_complete());
  EXPECT_EQ(p.state(), State::kHead);
  p.reset();
  p.feed("GET /2 HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(p.state(), State::kComplete);
  const ParsedRequest r = p.take();  // nothing of the first request is left
  EXPECT_TRUE(r.path == "/2" && r.keep_alive && r.headers.size() == 1 && r.body.empty());
  // reset() also clears an error.
  p.feed("@");
  EXPECT_EQ(p.state(), State::kError);
  EXPECT_EQ(p.feed("GET"), 0u);  // nothing after an error
  p.reset();
  EXPECT_EQ(p.error_status(), 0);
  EXPECT_EQ(p.state(), State::kHead);
}

// Memory stays within the documented bound while any input streams in, and
// the body's capacity within its declared length or the body limit.
TEST(HttpRequestParser, MemoryIsBounded) {
  const HttpLimits limits{.max_head_bytes = 4096, .max_headers = 50, .max_body_bytes = 100000};
  const size_t bound = 2 * limits.max_head_bytes + limits.max_body_bytes + 2 * limits.max_headers * 64 + 1024;
  const std::vector<std::string> inputs = {
      "GET /" + std::string(10000, 'a'),
      "GET / HTTP/1.1\r\nHost: h\r\nX: " + std::string(10000, 'v'),
      "GET / HTTP/1.1\r\n" + repeat("A:\r\n", 2000),
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n" + std::string(100000, 'b'),
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65537\r\n\r\n" + std::string(65537, 'b'),
      chunked_post(repeat("21\r\n" + std::string(33, 'c') + "\r\n", 3000)),
      chunked_post("0\r\n" + std::string(100000, 't')),
  };
  for (const std::string& in : inputs) {
    HttpRequestParser p(limits);
    for (size_t i = 0; i < in.size() && p.feed(std::string_view(in).substr(i, 97)) > 0; i += 97) {
      ASSERT_LE(p.memory_bytes(), bound) << in.substr(0, 40);
      ASSERT_LE(p.request().body.capacity(), std::max<size_t>(limits.max_body_bytes, 30));
    }
    // Exactly the declared length, where doubling would have reached 2^17.
    if (in.find("65537") != std::string::npos) {
      EXPECT_EQ(p.request().body.capacity(), 65537u);
    }
  }
}

// Random mutations of valid requests: whatever they parse to, every way of
// splitting them gives the same result, and the parser's invariants hold.
TEST(HttpRequestParser, SplitInvarianceOnMutatedInputs) {
  const std::vector<std::string> seeds = {
      "GET /a%20b?q=1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
      "POST /v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
      chunked_post("3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\n"),
      "OPTIONS * HTTP/1.0\nConnection: keep-alive\n\n",
  };
  const HttpLimits limits{.max_head_bytes = 120, .max_headers = 4, .max_body_bytes = 16};
  std::mt19937 rng(42);
  const std::string alphabet = "\r\n :;%0aAG/\t\x01\x80-,";
  for (int iter = 0; iter < 300; ++iter) {
    std::string in = seeds[iter % seeds.size()];
    for (int m = 0, n = 1 + rng() % 4; m < n; ++m) {
      const size_t pos = rng() % (in.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      const uint32_t op = rng() % 3;
      pos == in.size() || op == 0 ? in.insert(pos, 1, c) : op == 1 ? in.erase(pos, 1) : in.replace(pos, 1, 1, c);
    }
    const Outcome o = parse(in, limits);
    EXPECT_LE(o.consumed, in.size());
    if (o.state == State::kError) {
      EXPECT_TRUE(o.status == 400 || o.status == 413 || o.status == 431 || o.status == 501 || o.status == 505);
    } else if (o.state == State::kComplete) {
      EXPECT_EQ(o.status, 0);
      EXPECT_LE(o.request.body.size(), limits.max_body_bytes);
    } else {
      EXPECT_EQ(o.consumed, in.size());  // an unfinished request takes every byte
    }
  }
}

}  // namespace
}  // namespace tokenmill::http
