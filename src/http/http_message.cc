#include "http/http_message.h"

#include <algorithm>
#include <cctype>

namespace tokenmill::http {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

const std::string* find_header(const std::vector<std::pair<std::string, std::string>>& headers, std::string_view name) {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return &v;
  return nullptr;
}

std::string HttpRequest::header(std::string_view name) const {
  const std::string* v = find_header(headers, name);
  return v ? *v : std::string();
}

bool HttpRequest::has_header(std::string_view name) const { return find_header(headers, name) != nullptr; }

void HttpResponse::set_header(std::string name, std::string value) {
  for (auto& [n, v] : headers) {
    if (iequals(n, name)) {
      v = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

std::string HttpResponse::header(std::string_view name) const {
  const std::string* v = find_header(headers, name);
  return v ? *v : std::string();
}

}  // namespace tokenmill::http
