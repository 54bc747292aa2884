"""Token masks of constrained decoding cross-checked against an independent
implementation, llguidance (PyPI; a test dependency only), on Gemma 3
270M's own 262k-token vocabulary: `tokenmill grammar --walks` follows
random paths through a grammar and prints its allowed-token mask at each
step; llguidance, given the same GBNF (converted to its Lark dialect) and
the same vocabulary (read through llama-cpp-python), must allow exactly the
same tokens after the same prefix. End-of-generation tokens are compared
through can_end / is_accepting instead (the two list different EOG ids)."""
import json
import os

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


@pytest.fixture(scope="module")
def reference(gemma_path):
    llg = require_module("llguidance", "llguidance", "the independent token-mask implementation")
    require_module("llguidance.llamacpp", "llguidance", "llama.cpp vocabulary bridge")
    llama_cpp = require_module("llama_cpp", "llama-cpp-python", "reading the vocabulary for llguidance")
    import llguidance.llamacpp
    import llguidance.numpy
    np = require_module("numpy", "numpy", "token bitmasks")
    model = llama_cpp.Llama(model_path=gemma_path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    tok = llguidance.llamacpp.lltokenizer_from_vocab(vocab)
    return llg, tok, np


def walk_lines(tokenmill_bin, gemma_path, tmp_path, gbnf, seed, walks=3, steps=40):
    path = tmp_path / "g.gbnf"
    path.write_text(gbnf)
    out = run_tokenmill(tokenmill_bin, "grammar", "-m", gemma_path, "--gbnf", str(path), "--walks", str(walks),
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


def check_walks(reference, lines, gbnf):
    llg, tok, np = reference
    grammar = llg.LLMatcher.grammar_from_lark(llg.gbnf_to_lark(gbnf))
    n = tok.vocab_size
    eos = {tok.eos_token}
    checked = 0
    for line in lines:
        m = llg.LLMatcher(tok, grammar)
        assert not m.is_error(), m.get_error()
        assert m.consume_tokens(line["prefix"]), f"llguidance refuses the prefix {line['prefix']}: {m.get_error()}"
        mask = llg.numpy.allocate_token_bitmask(1, n)
        llg.numpy.fill_next_token_bitmask(m, mask, 0)
        words = mask[0].view(np.uint32)
        theirs = {i for i in range(n) if (int(words[i >> 5]) >> (i & 31)) & 1} - eos
        ours = ours_allowed(line["allowed_hex"], n)
        ours_text = {i for i in ours if i not in eos}
        only_ours = sorted(ours_text - theirs)[:8]
        only_theirs = sorted(theirs - ours_text)[:8]
        assert not only_ours and not only_theirs, (
            f"after prefix {line['prefix']}: only tokenmill allows "
            f"{[(i, tok.decode_bytes([i])) for i in only_ours]}, only llguidance "
            f"{[(i, tok.decode_bytes([i])) for i in only_theirs]}")
        assert line["can_end"] == m.is_accepting(), line["prefix"]
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("seed", [1, 2])
def test_json_like_grammar_masks_agree(reference, tokenmill_bin, gemma_path, tmp_path, seed):
    check_walks(reference, walk_lines(tokenmill_bin, gemma_path, tmp_path, JSON_LIKE, seed), JSON_LIKE)


@pytest.mark.parametrize("name", ["01", "05", "10", "15"])
def test_schema_grammar_masks_agree(reference, tokenmill_bin, gemma_path, tmp_path, name):
    files = sorted(f for f in os.listdir(SCHEMAS) if f.startswith(name + "_"))
    assert files, f"no schema {name}_* in {SCHEMAS}"
    gbnf = run_tokenmill(tokenmill_bin, "grammar", "-m", gemma_path, "--json-schema",
                         os.path.join(SCHEMAS, files[0]), "--print-gbnf").stdout
    check_walks(reference, walk_lines(tokenmill_bin, gemma_path, tmp_path, gbnf, 3, walks=2), gbnf)
