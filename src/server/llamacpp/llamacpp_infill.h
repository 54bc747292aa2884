// POST /infill (llama.cpp's code infilling): the model's fill-in-the-middle
// tokens and the prompt built from them, in llama.cpp's order:
//
//   [FIM_REP "myproject\n"] ([FIM_SEP "name\n"] | "\n\n--- snippet ---\n\n") text ...
//   [FIM_SEP "filename\n"]                       <- input_extra, repository style
//   [BOS] FIM_PRE input_prefix prompt FIM_SUF input_suffix FIM_MID
//
// (the repository lines only when the vocabulary has FIM_REP / FIM_SEP).
// When the whole does not fit the budget, the extra context loses its
// oldest tokens first, then the prefix its start and the suffix its end
// (the prefix keeps at least three quarters of what is left).
//
// Pure functions of the GGUF metadata, the tokenizer and the request, so
// they are unit-tested without a model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "server/json_fields.h"
#include "server/openai/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::server {

struct FimTokens {
  int32_t pre = -1, suf = -1, mid = -1;  // required
  int32_t rep = -1, sep = -1;            // repository-level context, optional

  bool usable() const { return pre >= 0 && suf >= 0 && mid >= 0; }
  // "prefix, middle" etc.: the required tokens the model lacks.
  std::string missing() const;
};

// The GGUF's tokenizer.ggml.fim_{pre,suf,mid,rep,sep}_token_id, else the
// older tokenizer.ggml.{prefix,suffix,middle}_token_id, else the token
// texts FIM models use (<|fim_prefix|>, <fim_prefix>, <PRE>, ...). Ids
// outside the vocabulary are ignored. `tok` may be null (no FIM then).
FimTokens find_fim_tokens(const gguf::GgufFile& file, const tokenizer::Tokenizer* tok);

struct InfillChunk {
  std::string filename = "tmp";
  std::string text;
};

struct InfillFields {
  std::string prefix;                         // input_prefix
  std::string suffix;                         // input_suffix
  std::vector<InfillChunk> extra;             // input_extra
  RequestJson prompt = RequestJson::array();  // text after the prefix (string or ids and strings)
};

// Takes input_prefix, input_suffix, input_extra and prompt out of a
// translated /infill body (the rest is sampling fields). Throws ApiError
// 400 naming the field.
InfillFields take_infill_fields(RequestJson& body);

struct InfillPrompt {
  std::vector<int32_t> tokens;
  bool trimmed = false;  // some context was left out to fit the budget
};

// The FIM prompt (see the top of this file), at most `budget` tokens when
// the required tokens and `prompt` leave room for it. Precondition:
// fim.usable().
InfillPrompt build_infill_prompt(const FimTokens& fim, const tokenizer::Tokenizer& tok, const InfillFields& in,
                                 const ParseLimits& limits, int64_t budget);

}  // namespace tokenmill::server
