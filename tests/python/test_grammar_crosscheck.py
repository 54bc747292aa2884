"""Token masks of constrained decoding cross-checked against an independent
implementation, llguidance (PyPI; a test dependency only), on Gemma 3
270M's own 262k-token vocabulary: `tokenmill grammar --walks` follows
random paths through a grammar and prints its allowed-token mask at each
step; llguidance, given the same GBNF (converted to its Lark dialect) and
the same vocabulary (read through llama-cpp-python), must allow exactly the
same tokens after the same prefix. Gemma's vocabulary is SentencePiece-style
with byte fallback; GPT-2's (a vocab-only file from ../shared/vocab) is
byte-level BPE. End-of-generation tokens are compared
through can_end / is_accepting instead (the two list different EOG ids)."""
import json
import os
import re

import pytest

from conftest import REPO, require_module, run_tokenmill

SCHEMAS = os.path.join(REPO, "tests", "data", "schemas")

JSON_LIKE = r'''
root ::= object
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )?
ws ::= [ \n]{0,3}
'''


_REFERENCES = {}


def reference_for(model_path):
    """llguidance, its tokenizer for the model's vocabulary (read through
    llama-cpp-python; vocab-only GGUF files work too), the llama.cpp model
    kept alive (llguidance tokenizes through it) and the GBNF converter."""
    if model_path in _REFERENCES:
        return _REFERENCES[model_path]
    llg = require_module("llguidance", "llguidance", "the independent token-mask implementation")
    require_module("llguidance.llamacpp", "llguidance", "llama.cpp vocabulary bridge")
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "reading the vocabulary for llguidance")
    import warnings

    import llguidance.llamacpp
    from llguidance.gbnf_to_lark import gbnf_to_lark
    model = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # llama-cpp-python's per-token attribute call
        tok = llguidance.llamacpp.lltokenizer_from_vocab(vocab)
    _REFERENCES[model_path] = (llg, tok, model, gbnf_to_lark)
    return _REFERENCES[model_path]


@pytest.fixture(scope="module")
def reference(gemma_path):
    return reference_for(gemma_path)


def walk_lines(tokenmill_bin, model_path, tmp_path, gbnf, seed, walks=3, steps=40):
    path = tmp_path / "g.gbnf"
    path.write_text(gbnf)
    out = run_tokenmill(tokenmill_bin, "grammar", "-m", model_path, "--gbnf", str(path), "--walks", str(walks),
                        "--steps", str(steps), "--seed", str(seed)).stdout
    return [json.loads(line) for line in out.splitlines()[:-1]]


def ours_allowed(hex_mask, n):
    ids = set()
    for w in range(len(hex_mask) // 8):
        bits = int(hex_mask[8 * w:8 * w + 8], 16)
        while bits:
            low = bits & -bits
            tid = 32 * w + low.bit_length() - 1
            if tid < n:
                ids.add(tid)
            bits ^= low
    return ids


def raw_unicode(gbnf):
    """\\uXXXX escapes of printable non-ASCII characters as the characters
    themselves (the same grammar): llguidance's GBNF converter writes such
    escapes in a form its own Lark parser refuses."""
    def repl(m):
        cp = int(m.group(2), 16)
        return m.group(1) + (chr(cp) if cp >= 0xA0 and not 0xD800 <= cp <= 0xDFFF else m.group(0)[len(m.group(1)):])
    return re.sub(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})", repl, gbnf)


def check_walks(reference, lines, gbnf, min_steps=20):
    llg, tok, _, gbnf_to_lark = reference
    # no_forcing: where the grammar forces a run of bytes, llguidance by
    # default allows only the canonical tokenization of it; tokenmill (like
    # llama.cpp) allows every token consistent with the grammar.
    lark = gbnf_to_lark(raw_unicode(gbnf))
    assert lark.startswith("%llguidance {}"), lark[:40]
    grammar = llg.LLMatcher.grammar_from_lark(lark.replace("%llguidance {}", '%llguidance {"no_forcing": true}', 1))
    n = tok.vocab_size
    # Special tokens (EOS, <end_of_turn> ...) never stand for text; whether
    # the sentence may end is compared through can_end / is_accepting.
    eos = {i for i in range(n) if tok.is_special_token(i)}
    checked = 0
    for line in lines:
        m = llg.LLMatcher(tok, grammar)
        assert not m.is_error(), m.get_error()
        assert m.consume_tokens(line["prefix"]), f"llguidance refuses the prefix {line['prefix']}: {m.get_error()}"
        mask = m.compute_bitmask()  # little-endian 32-bit words
        theirs = {i for i in range(n) if (mask[i >> 3] >> (i & 7)) & 1} - eos
        ours = ours_allowed(line["allowed_hex"], n)
        ours_text = ours - eos
        only_ours = sorted(ours_text - theirs)[:8]
        only_theirs = sorted(theirs - ours_text)[:8]
        assert not only_ours and not only_theirs, (
            f"after prefix {line['prefix']}: only tokenmill allows "
            f"{[(i, tok.decode_bytes([i])) for i in only_ours]}, only llguidance "
            f"{[(i, tok.decode_bytes([i])) for i in only_theirs]}")
        assert line["can_end"] == m.is_accepting(), line["prefix"]
        checked += 1
    assert checked >= min_steps


@pytest.mark.parametrize("seed", [1, 2])
def test_json_like_grammar_masks_agree(reference, tokenmill_bin, gemma_path, tmp_path, seed):
    check_walks(reference, walk_lines(tokenmill_bin, gemma_path, tmp_path, JSON_LIKE, seed), JSON_LIKE)


@pytest.mark.parametrize("name", ["01", "05", "10", "15", "20", "22", "23", "28", "30"])
def test_schema_grammar_masks_agree(reference, tokenmill_bin, gemma_path, tmp_path, name):
    files = sorted(f for f in os.listdir(SCHEMAS) if f.startswith(name + "_"))
    assert files, f"no schema {name}_* in {SCHEMAS}"
    gbnf = run_tokenmill(tokenmill_bin, "grammar", "-m", gemma_path, "--json-schema",
                         os.path.join(SCHEMAS, files[0]), "--print-gbnf").stdout
    check_walks(reference, walk_lines(tokenmill_bin, gemma_path, tmp_path, gbnf, 3, walks=5), gbnf, min_steps=8)


@pytest.mark.parametrize("seed", [1, 2])
def test_byte_level_bpe_vocabulary_masks_agree(tokenmill_bin, shared_dir, tmp_path, seed):
    gpt2 = os.path.join(shared_dir, "vocab", "ggml-vocab-gpt-2.gguf")
    check_walks(reference_for(gpt2), walk_lines(tokenmill_bin, gpt2, tmp_path, JSON_LIKE, seed), JSON_LIKE)
