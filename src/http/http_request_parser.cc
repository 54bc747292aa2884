#include "http/http_request_parser.h"

#include <algorithm>
#include <limits>

#include "http/http_message.h"
#include "util/check.h"

namespace tokenmill::http {

// One value per byte-level position in the grammar, so that a request split
// anywhere resumes exactly where it stopped. Trailer fields reuse the field
// phases (in_trailer_ tells them apart).
enum class HttpRequestParser::Phase : uint8_t {
  kStart,    // before the method; empty lines are skipped here
  kStartCr,  // CR of an empty line before the request line
  kMethod,
  kTargetStart,  // after the SP that ends the method
  kTarget,
  kVersion,  // after the SP that ends the target
  kRequestLineCr,
  kFieldStart,  // start of a field line, or of the empty line ending the head
  kFieldName,
  kFieldValue,
  kFieldCr,
  kHeadEndCr,     // CR of the empty line ending the head (or the trailers)
  kIdentityBody,  // Content-Length bytes
  kChunkSize,
  kChunkExtWs,  // whitespace after the size, before ';'
  kChunkExt,
  kChunkSizeCr,
  kChunkData,
  kChunkDataEnd,  // the CRLF after a chunk's data
  kChunkDataLf,
  kComplete,
  kError,
};

namespace {

constexpr std::string_view kHttpPrefix = "HTTP/";
constexpr size_t kVersionBytes = 8;  // "HTTP/x.y"

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// tchar (RFC 9110 §5.6.2).
bool is_tchar(char c) {
  return is_alpha(c) || is_digit(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Characters a URI may hold (RFC 3986 unreserved, sub-delims, gen-delims but
// '#', and '%' of pct-encoded); escapes are checked when the target is split.
bool is_target_char(char c) {
  return is_alpha(c) || is_digit(c) || std::string_view("-._~!$&'()*+,;=:@/?%[]").find(c) != std::string_view::npos;
}

// Field-value bytes other than SP and HT: VCHAR and obs-text.
bool is_field_vchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u > 0x20 && u != 0x7f);
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The elements of a comma-separated field list (RFC 9110 §5.6.1), trimmed,
// across every field named `name`. Empty elements are kept so callers that
// must refuse them can.
std::vector<std::string_view> list_elements(const ParsedRequest& r, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [n, v] : r.headers) {
    if (!iequals(n, name)) continue;
    std::string_view rest = v;
    while (true) {
      const size_t comma = rest.find(',');
      out.push_back(trim_ows(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return out;
}

// Percent-decodes a path; false on a bad escape or an escaped NUL, which
// would cut the path short for any C string consumer.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

size_t heap_bytes(const std::string& s) {
  // Short strings live inside the object (libstdc++ keeps 15 bytes there).
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

}  // namespace

std::string ParsedRequest::header(std::string_view name) const {
  const std::string* v = find_header(headers, name);
  return v ? *v : std::string();
}

bool ParsedRequest::has_header(std::string_view name) const { return find_header(headers, name) != nullptr; }

HttpRequestParser::HttpRequestParser(HttpLimits limits) : limits_(limits), phase_(Phase::kStart) {}

void HttpRequestParser::reset() {
  const HttpLimits limits = limits_;
  *this = HttpRequestParser(limits);
}

ParsedRequest HttpRequestParser::take() {
  TM_CHECK_MSG(phase_ == Phase::kComplete, "take() before the request is complete");
  ParsedRequest r = std::move(request_);
  reset();
  return r;
}

HttpRequestParser::State HttpRequestParser::state() const {
  switch (phase_) {
    case Phase::kComplete: return State::kComplete;
    case Phase::kError: return State::kError;
    default: return head_complete_ ? State::kBody : State::kHead;
  }
}

size_t HttpRequestParser::memory_bytes() const {
  const ParsedRequest& r = request_;
  size_t n = heap_bytes(r.method) + heap_bytes(r.target) + heap_bytes(r.path) + heap_bytes(r.query) +
             heap_bytes(r.body) + heap_bytes(name_) + heap_bytes(value_) + heap_bytes(error_message_);
  n += r.headers.capacity() * sizeof(r.headers[0]);
  for (const auto& [name, value] : r.headers) n += heap_bytes(name) + heap_bytes(value);
  return n;
}

void HttpRequestParser::fail(int status, std::string message) {
  phase_ = Phase::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

size_t HttpRequestParser::feed(std::string_view data) {
  size_t i = 0;
  while (i < data.size()) {
    switch (phase_) {
      case Phase::kComplete:
      case Phase::kError: return i;
      case Phase::kIdentityBody:
      case Phase::kChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(body_remaining_, data.size() - i));
        // A Content-Length body never needs more room than it declared.
        append_body(data.substr(i, n),
                    phase_ == Phase::kIdentityBody ? request_.body.size() + body_remaining_ : limits_.max_body_bytes);
        i += n;
        body_remaining_ -= n;
        if (body_remaining_ == 0) phase_ = phase_ == Phase::kIdentityBody ? Phase::kComplete : Phase::kChunkDataEnd;
        break;
      }
      case Phase::kChunkSize:
      case Phase::kChunkExtWs:
      case Phase::kChunkExt:
      case Phase::kChunkSizeCr: step_chunk_line(data[i++]); break;
      case Phase::kChunkDataEnd:
      case Phase::kChunkDataLf: step_chunk_data_end(data[i++]); break;
      default: step_head(data[i++]); break;
    }
  }
  return i;
}

void HttpRequestParser::step_head(char c) {
  if (++head_bytes_ > limits_.max_head_bytes) {
    return fail(431, (in_trailer_ ? "request head and trailer fields exceed " : "request head exceeds ") +
                         std::to_string(limits_.max_head_bytes) + " bytes");
  }
  if (phase_ >= Phase::kFieldStart) return step_field(c);
  if (phase_ >= Phase::kVersion) return step_version(c);
  step_request_line(c);
}

void HttpRequestParser::step_request_line(char c) {
  std::string& method = request_.method;
  std::string& target = request_.target;
  switch (phase_) {
    case Phase::kStart:
    case Phase::kStartCr:
      if (phase_ == Phase::kStart && c == '\r') return void(phase_ = Phase::kStartCr);
      if (c == '\n') {
        phase_ = Phase::kStart;
        if (++empty_lines_ > kMaxLeadingEmptyLines) fail(400, "too many empty lines before the request line");
        return;
      }
      if (phase_ == Phase::kStartCr) return fail(400, "CR not followed by LF");
      if (!is_tchar(c)) return fail(400, "request line does not start with a method token");
      method.push_back(c);
      return void(phase_ = Phase::kMethod);
    case Phase::kMethod:
      if (c == ' ') return void(phase_ = Phase::kTargetStart);
      if (!is_tchar(c)) return fail(400, "invalid character in method");
      return method.push_back(c);
    case Phase::kTargetStart:
      if (c == '*' && method != "OPTIONS") return fail(400, "the '*' request-target is only for OPTIONS");
      if (c != '/' && c != '*' && !is_alpha(c)) return fail(400, "request-target must start with '/', '*' or a scheme");
      target.push_back(c);
      return void(phase_ = Phase::kTarget);
    case Phase::kTarget:
      if (c == ' ') return void(phase_ = Phase::kVersion);
      if (target == "*" || !is_target_char(c) || (target[0] == '/' && (c == '[' || c == ']'))) {
        return fail(400, "invalid character in request-target");
      }
      return target.push_back(c);
    default: TM_CHECK_MSG(false, "not a request-line phase");
  }
}

// "HTTP/" DIGIT "." DIGIT, then the line end. Which versions are served is
// decided when the line ends (505), so "HTTP/2.0x" is 400, not 505.
void HttpRequestParser::step_version(char c) {
  if (phase_ == Phase::kRequestLineCr) {
    if (c != '\n') return fail(400, "CR not followed by LF");
    return finish_request_line();
  }
  if (version_pos_ == kVersionBytes) {
    if (c == '\r') return void(phase_ = Phase::kRequestLineCr);
    if (c == '\n') return finish_request_line();
    return fail(400, "malformed HTTP version");
  }
  const size_t pos = version_pos_++;
  const bool ok = pos < kHttpPrefix.size() ? c == kHttpPrefix[pos] : pos == 6 ? c == '.' : is_digit(c);
  if (!ok) return fail(400, "malformed HTTP version");
  if (pos == 5) version_major_ = c;
  if (pos == 7) version_minor_ = c;
}

void HttpRequestParser::finish_request_line() {
  if (version_major_ != '1' || (version_minor_ != '0' && version_minor_ != '1')) {
    return fail(505, std::string("HTTP version ") + version_major_ + "." + version_minor_ + " is not supported");
  }
  request_.version_minor = version_minor_ - '0';
  ParsedRequest& r = request_;
  r.method.shrink_to_fit();
  r.target.shrink_to_fit();
  std::string_view rest = r.target;
  if (rest == "*") {
    r.path.assign(1, '*');  // not = "*", which trips GCC 12's false -Wrestrict
    phase_ = Phase::kFieldStart;
    return;
  }
  if (rest[0] != '/') {
    // absolute-form: "http" ["s"] "://" authority path-abempty ["?" query].
    const size_t colon = rest.find(':');
    const std::string_view scheme = rest.substr(0, colon);
    if (colon == std::string_view::npos || !(iequals(scheme, "http") || iequals(scheme, "https")) ||
        rest.substr(colon + 1, 2) != "//") {
      return fail(400, "request-target is neither origin-form nor an http(s) absolute-form URI");
    }
    rest.remove_prefix(colon + 3);
    const size_t end = std::min(rest.find('/'), rest.find('?'));
    const std::string_view authority = rest.substr(0, end);
    if (authority.empty()) return fail(400, "absolute-form request-target without a host");
    if (authority.find('@') != std::string_view::npos) return fail(400, "request-target with userinfo");
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  if (rest.find_first_of("[]") != std::string_view::npos) return fail(400, "invalid character in request-target");
  const size_t question = rest.find('?');
  std::string_view path = rest.substr(0, question);
  if (question != std::string_view::npos) r.query = std::string(rest.substr(question + 1));
  if (path.empty()) path = "/";
  if (!percent_decode(path, &r.path)) return fail(400, "malformed or NUL percent-escape in the request path");
  phase_ = Phase::kFieldStart;
}

void HttpRequestParser::step_field(char c) {
  switch (phase_) {
    case Phase::kFieldStart:
      if (c == '\r') return void(phase_ = Phase::kHeadEndCr);
      if (c == '\n') return finish_head();
      if (c == ' ' || c == '\t') return fail(400, "field line starts with whitespace (obs-fold is not allowed)");
      if (!is_tchar(c)) return fail(400, "invalid character in header field name");
      if (!in_trailer_ && request_.headers.size() >= limits_.max_headers) {
        return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
      }
      if (!in_trailer_) name_.push_back(c);
      return void(phase_ = Phase::kFieldName);
    case Phase::kFieldName:
      if (c == ':') return void(phase_ = Phase::kFieldValue);
      if (c == ' ' || c == '\t') return fail(400, "whitespace between header field name and colon");
      if (c == '\r' || c == '\n') return fail(400, "header field line without a colon");
      if (!is_tchar(c)) return fail(400, "invalid character in header field name");
      if (!in_trailer_) name_.push_back(c);
      return;
    case Phase::kFieldValue:
      if (c == '\r') return void(phase_ = Phase::kFieldCr);
      if (c == '\n') return finish_field();
      if (c != ' ' && c != '\t' && !is_field_vchar(c)) return fail(400, "control character in header field value");
      // Leading OWS is dropped here, trailing OWS when the line ends.
      if (!in_trailer_ && (!value_.empty() || is_field_vchar(c))) value_.push_back(c);
      return;
    case Phase::kFieldCr:
    case Phase::kHeadEndCr:
      if (c != '\n') return fail(400, "CR not followed by LF");
      return phase_ == Phase::kFieldCr ? finish_field() : finish_head();
    default: TM_CHECK_MSG(false, "not a field phase");
  }
}

void HttpRequestParser::finish_field() {
  phase_ = Phase::kFieldStart;
  if (in_trailer_) return;  // trailer fields are checked, then dropped
  while (!value_.empty() && (value_.back() == ' ' || value_.back() == '\t')) value_.pop_back();
  name_.shrink_to_fit();
  value_.shrink_to_fit();
  request_.headers.emplace_back(std::move(name_), std::move(value_));
  name_.clear();
  value_.clear();
}

void HttpRequestParser::finish_head() {
  if (in_trailer_) {
    phase_ = Phase::kComplete;
    return;
  }
  head_complete_ = true;
  ParsedRequest& r = request_;
  const bool http11 = r.version_minor == 1;
  const size_t num_hosts =
      std::count_if(r.headers.begin(), r.headers.end(), [](const auto& h) { return iequals(h.first, "Host"); });
  if (num_hosts > 1) return fail(400, "more than one Host header field");
  if (num_hosts == 0 && http11) return fail(400, "HTTP/1.1 request without a Host header field");
  bool close = false, keep_alive = false;
  for (std::string_view option : list_elements(r, "Connection")) {
    close = close || iequals(option, "close");
    keep_alive = keep_alive || iequals(option, "keep-alive");
  }
  r.keep_alive = !close && (http11 || keep_alive);
  for (std::string_view e : list_elements(r, "Expect")) r.expects_continue |= http11 && iequals(e, "100-continue");
  apply_framing();
}

// Decides the body length from Transfer-Encoding and Content-Length (RFC 9112
// §6.3). A disagreement is an error rather than a guess: a proxy in front
// that guessed otherwise would let a second, smuggled request through.
void HttpRequestParser::apply_framing() {
  const ParsedRequest& r = request_;
  const bool has_te = r.has_header("Transfer-Encoding"), has_cl = r.has_header("Content-Length");
  if (has_te) {
    if (has_cl) return fail(400, "both Transfer-Encoding and Content-Length");
    if (r.version_minor == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    std::vector<std::string_view> codings = list_elements(r, "Transfer-Encoding");
    std::erase_if(codings, [](std::string_view c) { return c.empty(); });
    if (codings.empty() || !iequals(codings.back(), "chunked")) {
      return fail(400, "chunked is not the final transfer coding");
    }
    codings.pop_back();
    if (std::any_of(codings.begin(), codings.end(), [](std::string_view c) { return iequals(c, "chunked"); })) {
      return fail(400, "chunked applied more than once");
    }
    if (!codings.empty()) return fail(501, "transfer coding '" + std::string(codings[0]) + "' is not implemented");
    phase_ = Phase::kChunkSize;
    return;
  }
  phase_ = Phase::kComplete;
  if (!has_cl) return;
  uint64_t length = 0;
  bool first = true;
  for (std::string_view e : list_elements(r, "Content-Length")) {
    if (e.empty() || !std::all_of(e.begin(), e.end(), is_digit)) return fail(400, "Content-Length is not a number");
    uint64_t v = 0;
    for (char d : e) {
      const auto digit = static_cast<uint64_t>(d - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        return fail(400, "Content-Length does not fit 64 bits");
      }
      v = v * 10 + digit;
    }
    if (!first && v != length) return fail(400, "conflicting Content-Length values");
    length = v;
    first = false;
  }
  if (length > limits_.max_body_bytes) {
    return fail(413, "body of " + std::to_string(length) + " bytes exceeds the limit of " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  }
  if (length > 0) phase_ = Phase::kIdentityBody;
  body_remaining_ = length;
}

void HttpRequestParser::start_chunk_line() {
  phase_ = Phase::kChunkSize;
  chunk_line_bytes_ = 0;
  chunk_size_digits_ = false;
  body_remaining_ = 0;
}

void HttpRequestParser::step_chunk_data_end(char c) {
  if (c == '\n') return start_chunk_line();
  if (c == '\r' && phase_ == Phase::kChunkDataEnd) return void(phase_ = Phase::kChunkDataLf);
  fail(400, "chunk data not followed by CRLF");
}

// chunk-size [BWS ";" chunk-ext] CRLF. Extensions are skipped, their bytes
// bounded by kMaxChunkLineBytes like the rest of the line.
void HttpRequestParser::step_chunk_line(char c) {
  if (++chunk_line_bytes_ > kMaxChunkLineBytes) {
    return fail(400, "chunk size line longer than " + std::to_string(kMaxChunkLineBytes) + " bytes");
  }
  if (c == '\n' && phase_ != Phase::kChunkExtWs && (phase_ != Phase::kChunkSize || chunk_size_digits_)) {
    return finish_chunk_line();
  }
  switch (phase_) {
    case Phase::kChunkSize:
      if (const int d = hex_value(c); d >= 0) {
        const uint64_t room = limits_.max_body_bytes - request_.body.size();
        // Checked before multiplying, so no size overflows 64 bits.
        if (static_cast<uint64_t>(d) > room || body_remaining_ > (room - d) / 16) {
          return fail(413, "chunked body exceeds the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
        }
        body_remaining_ = body_remaining_ * 16 + d;
        return void(chunk_size_digits_ = true);
      }
      if (!chunk_size_digits_) return fail(400, "chunk size is not a hex number");
      if (c == ';') return void(phase_ = Phase::kChunkExt);
      if (c == ' ' || c == '\t') return void(phase_ = Phase::kChunkExtWs);
      if (c == '\r') return void(phase_ = Phase::kChunkSizeCr);
      return fail(400, "invalid character in chunk size");
    case Phase::kChunkExtWs:
      if (c == ';') return void(phase_ = Phase::kChunkExt);
      if (c != ' ' && c != '\t') return fail(400, "whitespace after a chunk size not followed by an extension");
      return;
    case Phase::kChunkExt:
      if (c == '\r') return void(phase_ = Phase::kChunkSizeCr);
      if (c != '\t' && c != ' ' && !is_field_vchar(c)) return fail(400, "control character in chunk extension");
      return;
    case Phase::kChunkSizeCr: return fail(400, "CR not followed by LF");
    default: TM_CHECK_MSG(false, "not a chunk-line phase");
  }
}

void HttpRequestParser::finish_chunk_line() {
  if (body_remaining_ > 0) return void(phase_ = Phase::kChunkData);
  in_trailer_ = true;  // last-chunk: trailer fields, then the empty line
  phase_ = Phase::kFieldStart;
}

// Appends body bytes, growing the capacity geometrically but never past
// `capacity_limit` (the declared length, or max_body_bytes), which a plain
// append could overshoot by up to twice the size.
void HttpRequestParser::append_body(std::string_view bytes, size_t capacity_limit) {
  std::string& body = request_.body;
  const size_t need = body.size() + bytes.size();
  if (need > body.capacity()) {
    std::string grown;
    grown.reserve(std::min(capacity_limit, std::max(need, 2 * body.capacity())));
    grown.append(body);
    body.swap(grown);
  }
  body.append(bytes);
}

}  // namespace tokenmill::http
