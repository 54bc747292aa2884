#include "server/llamacpp/llamacpp_infill.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string_view>

#include "server/api_error.h"
#include "server/llamacpp/llamacpp_request.h"

namespace tokenmill::server {
namespace {

// The GGUF key's token id when it is an integer inside the vocabulary.
int32_t fim_key(const gguf::GgufFile& file, std::string_view key, int32_t n_vocab) {
  const gguf::Value* v = file.find(key);
  if (!v || !v->is_integer()) return -1;
  const int64_t id = v->as_int();
  return id >= 0 && id < n_vocab ? static_cast<int32_t>(id) : -1;
}

int32_t fim_text(const tokenizer::Tokenizer& tok, std::initializer_list<std::string_view> texts) {
  for (std::string_view t : texts)
    if (std::optional<int32_t> id = tok.find_token(t)) return *id;
  return -1;
}

int32_t fim_id(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok, std::string_view key,
               std::string_view old_key, std::initializer_list<std::string_view> texts) {
  int32_t id = fim_key(file, key, tok.vocab_size());
  if (id < 0 && !old_key.empty()) id = fim_key(file, old_key, tok.vocab_size());
  return id >= 0 ? id : fim_text(tok, texts);
}

std::vector<int32_t> plain_tokens(const tokenizer::Tokenizer& tok, std::string_view text) {
  return tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

void fim_append(std::vector<int32_t>& to, const std::vector<int32_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

std::string string_field(const JsonFields& f, const char* name) { return f.string(name).value_or(""); }

// The repository-style context of input_extra (see the header).
std::vector<int32_t> extra_tokens(const FimTokens& fim, const tokenizer::Tokenizer& tok,
                                  const std::vector<InfillChunk>& extra) {
  std::vector<int32_t> out;
  if (fim.rep >= 0) {
    out.push_back(fim.rep);
    fim_append(out, plain_tokens(tok, "myproject\n"));
  }
  for (const InfillChunk& c : extra) {
    if (fim.sep >= 0) {
      out.push_back(fim.sep);
      fim_append(out, plain_tokens(tok, c.filename + "\n"));
    } else {
      fim_append(out, plain_tokens(tok, "\n\n--- snippet ---\n\n"));
    }
    fim_append(out, plain_tokens(tok, c.text));
  }
  if (fim.sep >= 0) {
    out.push_back(fim.sep);
    fim_append(out, plain_tokens(tok, "filename\n"));
  }
  return out;
}

}  // namespace

std::string FimTokens::missing() const {
  std::string out;
  for (const auto& [id, name] : {std::pair{pre, "prefix"}, std::pair{suf, "suffix"}, std::pair{mid, "middle"}}) {
    if (id >= 0) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

FimTokens find_fim_tokens(const gguf::GgufFile& file, const tokenizer::Tokenizer* tok) {
  FimTokens f;
  if (!tok) return f;
  f.pre = fim_id(file, *tok, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id",
                 {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                  "<\xEF\xBD\x9C"
                  "fim\xE2\x96\x81"
                  "begin\xEF\xBD\x9C>",
                  "<PRE>", "\xE2\x96\x81<PRE>"});
  f.suf = fim_id(file, *tok, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id",
                 {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                  "<\xEF\xBD\x9C"
                  "fim\xE2\x96\x81"
                  "hole\xEF\xBD\x9C>",
                  "<SUF>", "\xE2\x96\x81<SUF>"});
  f.mid = fim_id(file, *tok, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id",
                 {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                  "<\xEF\xBD\x9C"
                  "fim\xE2\x96\x81"
                  "end\xEF\xBD\x9C>",
                  "<MID>", "\xE2\x96\x81<MID>"});
  f.rep = fim_id(file, *tok, "tokenizer.ggml.fim_rep_token_id", "",
                 {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  f.sep = fim_id(file, *tok, "tokenizer.ggml.fim_sep_token_id", "", {"<|file_sep|>", "<file_sep>"});
  return f;
}

InfillFields take_infill_fields(RequestJson& body) {
  InfillFields in;
  {
    const JsonFields f(body);
    in.prefix = string_field(f, "input_prefix");
    in.suffix = string_field(f, "input_suffix");
    if (const RequestJson* p = f.find("prompt")) in.prompt = *p;
    if (const RequestJson* extra = f.find("input_extra")) {
      if (!extra->is_array())
        bad_request("input_extra", "'input_extra' must be a list of {{\"filename\", \"text\"}} objects, got {}",
                    describe_json(*extra));
      for (size_t i = 0; i < extra->size(); ++i) {
        const RequestJson& chunk = (*extra)[i];
        const std::string where = "input_extra[" + std::to_string(i) + "].";
        if (!chunk.is_object())
          bad_request("input_extra", "'input_extra' items must be {{\"filename\", \"text\"}} objects, got {}",
                      describe_json(chunk));
        const JsonFields cf(chunk, where);
        cf.reject_unknown({"filename", "text"});
        in.extra.push_back(InfillChunk{cf.string("filename").value_or("tmp"), string_field(cf, "text")});
      }
    }
  }
  for (const char* name : {"input_prefix", "input_suffix", "input_extra", "prompt"}) body.erase(name);
  return in;
}

InfillPrompt build_infill_prompt(const FimTokens& fim, const tokenizer::Tokenizer& tok, const InfillFields& in,
                                 const ParseLimits& limits, int64_t budget) {
  std::vector<int32_t> prefix = plain_tokens(tok, in.prefix);
  std::vector<int32_t> suffix = plain_tokens(tok, in.suffix);
  std::vector<int32_t> extra = extra_tokens(fim, tok, in.extra);
  const bool empty_prompt = in.prompt.is_string() ? in.prompt.get_ref<const std::string&>().empty()
                                                  : in.prompt.is_array() && in.prompt.empty();
  const std::vector<int32_t> prompt =
      empty_prompt ? std::vector<int32_t>{}
                   : tokenize_llama_prompt(in.prompt, &tok, limits, /*add_special=*/false, "prompt");
  const bool bos = tok.add_bos() && tok.bos_id() >= 0;
  const int64_t fixed = 3 + (bos ? 1 : 0) + static_cast<int64_t>(prompt.size());
  const int64_t avail = std::max<int64_t>(budget - fixed, 0);
  const auto n_prefix = static_cast<int64_t>(prefix.size()), n_suffix = static_cast<int64_t>(suffix.size());
  const int64_t prefix_take = std::min(n_prefix, std::max(avail * 3 / 4, avail - n_suffix));
  const int64_t suffix_take = std::min(n_suffix, avail - prefix_take);
  const int64_t extra_take = std::min(static_cast<int64_t>(extra.size()), avail - prefix_take - suffix_take);
  InfillPrompt out;
  out.trimmed = prefix_take < n_prefix || suffix_take < n_suffix || extra_take < static_cast<int64_t>(extra.size());
  std::vector<int32_t>& t = out.tokens;
  t.insert(t.end(), extra.end() - extra_take, extra.end());
  if (bos) t.push_back(tok.bos_id());
  t.push_back(fim.pre);
  t.insert(t.end(), prefix.end() - prefix_take, prefix.end());
  fim_append(t, prompt);
  t.push_back(fim.suf);
  t.insert(t.end(), suffix.begin(), suffix.begin() + suffix_take);
  t.push_back(fim.mid);
  return out;
}

}  // namespace tokenmill::server
