#include "jinja/template.h"

#include <fmt/format.h>

#include <stdexcept>

#include "jinja/parser.h"
#include "jinja/render.h"

namespace tokenmill::jinja {

TemplateError::TemplateError(ErrorKind kind, int line, int column, const std::string& message)
    : Error(fmt::format("chat template line {}, column {}: {}", line, column, message)),
      kind_(kind),
      line_(line),
      column_(column),
      detail_(message) {}

Template Template::parse(std::string_view source, const ParseOptions& options) {
  auto program = std::make_shared<Program>();
  program->source = std::string(source);
  Parser parser(tokenize(program->source, options));
  program->body = parser.parse_template();
  Template t;
  t.program_ = std::move(program);
  return t;
}

std::string Template::render(const nlohmann::ordered_json& context, const Limits& limits) const {
  Renderer renderer(context, limits);
  try {
    return renderer.run(program_->body);
  } catch (const TemplateError& e) {
    if (e.line() != 0) throw;
    throw TemplateError(e.kind(), 1, 1, e.detail());
  } catch (const std::length_error& e) {
    throw TemplateError(ErrorKind::kLimit, 1, 1, e.what());
  } catch (const std::logic_error& e) {
    throw TemplateError(ErrorKind::kRender, 1, 1, e.what());
  }
}

namespace {

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool Template::mentions(std::string_view name) const {
  const std::string& s = program_->source;
  for (size_t at = s.find(name); at != std::string::npos; at = s.find(name, at + 1)) {
    const bool left = at == 0 || !is_identifier_char(s[at - 1]);
    const bool right = at + name.size() >= s.size() || !is_identifier_char(s[at + name.size()]);
    if (left && right) return true;
  }
  return false;
}

const std::string& Template::source() const { return program_->source; }

}  // namespace tokenmill::jinja
