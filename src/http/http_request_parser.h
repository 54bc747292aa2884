// Incremental HTTP/1.1 request parser (RFC 9112) for the event-driven front
// end (http_front.h). It never does I/O: a connection feeds it the bytes it
// has read, in pieces of any size, and the outcome does not depend on how
// the bytes were split (byte by byte, or all at once, give the same request
// or the same error at the same byte).
//
// What it accepts:
// - Request line: method (a token, case-sensitive), one SP, request-target,
//   one SP, "HTTP/1.1" or "HTTP/1.0". The target is origin-form ("/p?q"),
//   "*" (OPTIONS only) or absolute-form ("http[s]://authority/p?q", whose
//   path and query are taken; userinfo is refused). Authority-form (CONNECT)
//   is refused. Target bytes are RFC 3986 characters only (no '#', no
//   space, no control or non-ASCII byte; '[' and ']' only in an authority).
//   Any other HTTP/x.y is 505. Up to kMaxLeadingEmptyLines empty lines
//   before the request line are skipped (RFC 9112 §2.2).
// - Lines end with CRLF or a bare LF; a CR not followed by LF is 400.
// - Header fields: a token name directly followed by ':' (whitespace before
//   the colon is 400), a value of visible characters, SP, HT and obs-text,
//   trimmed of surrounding whitespace. obs-fold (a line starting with SP or
//   HT) is 400, as is any other control character.
// - Framing (RFC 9112 §6): Transfer-Encoding and Content-Length together,
//   or Transfer-Encoding in an HTTP/1.0 request, is 400 (request smuggling).
//   Transfer-Encoding must end in "chunked" (case-insensitive), or the body
//   length is unknown: 400; chunked preceded by other codings ("gzip,
//   chunked") is 501. Content-Length is digits; several values must agree,
//   and one that does not fit 64 bits is 400. No framing header: empty body.
// - Chunked bodies: hex sizes without sign or spaces, extensions (";...")
//   skipped, each size line at most kMaxChunkLineBytes (400), CRLF after
//   each chunk's data (400), trailer fields after the last chunk parsed and
//   discarded within what is left of max_head_bytes (431).
// - HTTP/1.1 without Host, or more than one Host, is 400. Expectations
//   other than 100-continue are ignored.
//
// Errors are reported as soon as the bytes prove them, not when the line or
// head ends: a non-token method byte is 400 at that byte; the byte that
// takes the head past max_head_bytes is 431, and so is the first byte of
// field max_headers + 1; an unsupported version is 505 at the end of the
// request line (so "HTTP/2.0x" is 400); a Content-Length above
// max_body_bytes is 413 at the end of the head (before any body byte); a
// chunk size that would take the decoded body past max_body_bytes is 413 at
// the hex digit that does so. Error statuses: 400, 413, 431, 501, 505.
// After an error the connection must be closed: the parser cannot find the
// start of the next request.
//
// Memory: a parser holds at most about 2 * max_head_bytes (the head's
// fields, plus the decoded path and the query, which copy the target) +
// max_body_bytes + O(max_headers) bookkeeping, whatever the input
// (memory_bytes() measures it). The body never grows past the declared
// Content-Length or max_body_bytes, so its capacity stays within them.
//
// Not thread-safe: one connection owns one parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokenmill::http {

inline constexpr size_t kMaxLeadingEmptyLines = 8;
inline constexpr size_t kMaxChunkLineBytes = 1024;  // size, extensions and CRLF

struct HttpLimits {
  size_t max_head_bytes = 16 * 1024;  // request line + headers, CRLFs included
  size_t max_headers = 100;
  size_t max_body_bytes = 8 << 20;  // decoded body, chunked or not
};

struct ParsedRequest {
  std::string method;     // as sent, case-sensitive
  std::string target;     // request-target as sent
  std::string path;       // target's path, percent-decoded ("%00" and bad escapes are 400); "*" for asterisk-form
  std::string query;      // raw, after the first '?'; "" when absent
  int version_minor = 1;  // HTTP/1.0 or HTTP/1.1
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed of OWS
  std::string body;                                          // decoded (chunked framing removed)
  // HTTP/1.1: unless a Connection option is "close"; HTTP/1.0: only with a
  // "keep-alive" option (and no "close").
  bool keep_alive = true;
  // "Expect: 100-continue" in an HTTP/1.1 request (HTTP/1.0 ignores it,
  // RFC 9110 §10.1.1).
  bool expects_continue = false;

  // Case-insensitive name lookup; the first field's value, "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

class HttpRequestParser {
 public:
  enum class State { kHead, kBody, kComplete, kError };

  explicit HttpRequestParser(HttpLimits limits = {});

  // Consumes bytes of the current request and returns how many it took. It
  // takes all of `data` unless the request completes (the bytes after it,
  // e.g. a pipelined request, stay with the caller) or an error is found
  // (the byte that proves it is counted as taken). In kComplete or kError
  // it takes nothing. Cost: linear in the bytes taken.
  size_t feed(std::string_view data);

  State state() const;
  // The head has been parsed (and request() is valid), whatever came after:
  // the connection switches from the header deadline to the body deadline.
  bool head_complete() const { return head_complete_; }
  // The request so far; valid once head_complete(). The body grows as it
  // arrives.
  const ParsedRequest& request() const { return request_; }
  // Moves the complete request out (state must be kComplete) and resets the
  // parser for the next request on the connection.
  ParsedRequest take();
  // Forgets everything but the limits.
  void reset();

  // In kError: 400, 413, 431, 501 or 505; 0 otherwise.
  int error_status() const { return error_status_; }
  // In kError: what was wrong, one sentence for the error body.
  const std::string& error_message() const { return error_message_; }

  // Heap bytes held for the current request (string and vector capacities).
  size_t memory_bytes() const;

 private:
  enum class Phase : uint8_t;

  void step_head(char c);
  void step_request_line(char c);
  void step_version(char c);
  void step_field(char c);
  void step_chunk_line(char c);
  void step_chunk_data_end(char c);
  void finish_chunk_line();
  void finish_request_line();
  void finish_field();
  void finish_head();
  void apply_framing();
  void start_chunk_line();
  void append_body(std::string_view bytes, size_t capacity_limit);
  void fail(int status, std::string message);

  HttpLimits limits_;
  ParsedRequest request_;
  Phase phase_;
  bool head_complete_ = false;
  bool in_trailer_ = false;
  size_t head_bytes_ = 0;  // bytes of the head (and then trailers) seen
  size_t empty_lines_ = 0;
  size_t version_pos_ = 0;  // bytes of "HTTP/x.y" seen
  char version_major_ = 0;
  char version_minor_ = 0;
  std::string name_;                // field name being read
  std::string value_;               // field value being read
  uint64_t body_remaining_ = 0;     // Content-Length bytes, or bytes of the current chunk, still to come
  size_t chunk_line_bytes_ = 0;     // of the current chunk-size line
  bool chunk_size_digits_ = false;  // the size line has a hex digit
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace tokenmill::http
