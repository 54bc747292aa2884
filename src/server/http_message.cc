#include "server/http_message.h"

#include <algorithm>
#include <cctype>

namespace tokenmill::server {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

namespace {

template <typename Headers>
auto find_header(Headers& headers, std::string_view name) {
  return std::find_if(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  auto it = find_header(headers, name);
  return it == headers.end() ? std::string() : it->second;
}

bool HttpRequest::has_header(std::string_view name) const { return find_header(headers, name) != headers.end(); }

void HttpResponse::set_header(std::string name, std::string value) {
  auto it = find_header(headers, name);
  if (it != headers.end()) {
    it->second = std::move(value);
  } else {
    headers.emplace_back(std::move(name), std::move(value));
  }
}

std::string HttpResponse::header(std::string_view name) const {
  auto it = find_header(headers, name);
  return it == headers.end() ? std::string() : it->second;
}

}  // namespace tokenmill::server
