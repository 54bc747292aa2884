// The reason phrase of an HTTP status code (RFC 9110 section 15), for the
// status line the front writes.
#pragma once

namespace tokenmill::http {

// "OK", "Not Found", ...; "Unknown" for a code without one here.
const char* status_reason(int status);

}  // namespace tokenmill::http
