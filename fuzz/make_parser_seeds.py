#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_tokenizer_metadata, fuzz_chat_template,
fuzz_llama2c_import and fuzz_bench_parsers: a few small valid inputs in each
target's input layout (see the comment at the top of each target). All text
here is written for these seeds. Run from the repository root:
python3 fuzz/make_parser_seeds.py"""
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
SPACE = "\u2581"  # SentencePiece's space marker
ABSENT = 0xFF


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def tokenizer_seed(model, pre, present, flags, ids, tokens, merges, types, scores, text,
                   elements=0x00):
    """Header bytes, then the '\\0'-separated sections. Type and score bytes
    must not be 0 (the separator): type 0 is written as 8, score 0 as 0x80
    would be -32, so scores use small non-zero steps."""
    header = bytes([model, pre, elements, present, flags] + ids)
    sections = ["\n".join(tokens).encode(), "\n".join(merges).encode(), bytes(types),
                bytes(s & 0xFF for s in scores), text.encode()]
    assert all(0 not in s for s in sections[:4])
    return header + b"\0".join(sections)


def tokenizer_seeds():
    t = "fuzz_tokenizer_metadata"
    spm_tokens = ["<unk>", "<s>", "</s>", SPACE, "a", "b", SPACE + "a", SPACE + "b", "ab",
                  "<0x41>", "<0xE2>", "<0x96>", "<0x81>", "<end_of_turn>"]
    spm_types = [2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6, 6, 3]
    spm_scores = [-1, -1, -1, -8, -12, -12, -4, -4, -6, -40, -40, -40, -40, -1]
    # Present: scores (1) and types (2); bos 1, eos 2, unk 0.
    write(t, "spm_small", tokenizer_seed(0, 0, 3, 0, [1, 2, 0, ABSENT, ABSENT, ABSENT],
                                         spm_tokens, [], spm_types, spm_scores,
                                         "ab a<end_of_turn>bA \u00e9"))
    # The same with add_bos false, add_eos true, add_space_prefix false.
    write(t, "spm_flags", tokenizer_seed(0, 0, 3 | 8 | 16 | 32, 2, [1, 2, 0, 0, 13, ABSENT],
                                         spm_tokens, [], spm_types, spm_scores, "b ab"))
    bpe_tokens = ["a", "b", "c", "\u0120", "ab", "\u0120a", "abc", "\u0120ab", "1", "<|endoftext|>"]
    bpe_merges = ["a b", "ab c", "\u0120 a", "\u0120a b"]
    bpe_types = [1] * 9 + [3]
    # Present: types (2), merges (4), pre (128); pre 0 "default", 7 "llama3".
    write(t, "bpe_default", tokenizer_seed(1, 0, 2 | 4 | 128, 0, [9, 9] + [ABSENT] * 4,
                                           bpe_tokens, bpe_merges, bpe_types, [],
                                           "abc ab a<|endoftext|>c 11"))
    # Regression: token types as uint64 (element nibble 6), one above INT64_MAX.
    write(t, "u64_token_types", tokenizer_seed(0, 0, 2, 0, [ABSENT] * 6, spm_tokens[:4], [],
                                               [2, 3, 0x80, 1], [], "a", elements=0x06))
    write(t, "bpe_llama3", tokenizer_seed(1, 7, 2 | 4 | 128 | 8, 1, [ABSENT] * 6,
                                          bpe_tokens, bpe_merges, bpe_types, [], " ab abc\n1"))


GEMMA_STYLE = """{{- bos_token -}}
{%- for turn in messages -%}
  {%- set speaker = 'model' if turn.role == 'assistant' else 'user' -%}
  <start_of_turn>{{ speaker }}
{{ turn.content | trim }}<end_of_turn>
{% endfor -%}
{%- if add_generation_prompt %}<start_of_turn>model
{% endif -%}"""

CHATML_STYLE = """{%- for turn in messages -%}
<|im_start|>{{ turn.role }}
{{ turn.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""

LLAMA2_STYLE = """{%- for turn in messages -%}
  {%- if turn.role == 'system' -%}<<SYS>>
{{ turn.content }}
<</SYS>>
  {%- elif turn.role == 'user' -%}[INST] {{ turn.content | trim }} [/INST]
  {%- else %} {{ turn.content | trim }} {{ eos_token }}{% endif -%}
{%- endfor -%}"""


def chat_seed(flags, template, bos, messages):
    parts = [template, bos] + [f"{role}\n{content}" for role, content in messages]
    return bytes([flags]) + "\0".join(parts).encode()


def chat_seeds():
    t = "fuzz_chat_template"
    conversation = [("system", "Answer in one sentence."), ("user", "  What is a kettle? "),
                    ("assistant", "A pot for boiling water.\n"), ("user", "And a ladle?")]
    write(t, "gemma_style", chat_seed(1, GEMMA_STYLE, "<bos>", conversation))
    write(t, "chatml_style", chat_seed(1, CHATML_STYLE, "", conversation + [("assistant", "")]))
    write(t, "llama2_style", chat_seed(0, LLAMA2_STYLE, "<s>", conversation))
    write(t, "by_name", chat_seed(3, "Phi3", "", conversation[1:3]))


def llama2c_checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared=True):
    head = dim // heads
    kv_dim = kv_heads * head
    n = (vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim)
         + dim + seq_len * head)
    if not shared:
        n += vocab * dim
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab,
                         seq_len)
    return header + struct.pack(f"<{n}f", *[((i * 7) % 13 - 6) / 8 for i in range(n)])


def llama2c_tokenizer(pieces):
    out = struct.pack("<i", max(len(p) for p in pieces))
    for i, p in enumerate(pieces):
        out += struct.pack("<fi", -float(i), len(p)) + p
    return out


def llama2c_seeds():
    t = "fuzz_llama2c_import"
    # Mode byte: bit 0 clear = checkpoint, bits 1..2 the format
    # (0 F32, 1 F16, 2 Q8_0, 3 Q4_K_M).
    write(t, "tiny_f32", bytes([0]) + llama2c_checkpoint(4, 8, 1, 2, 1, 5, 4))
    write(t, "tiny_unshared_f16", bytes([2]) + llama2c_checkpoint(4, 6, 2, 2, 2, 3, 2, shared=False))
    # Q4_K_M: rows of 4 fit no quantized block, so this takes the fallback path.
    write(t, "tiny_q4_k_m", bytes([6]) + llama2c_checkpoint(4, 8, 1, 1, 1, 2, 1))
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b"<0x0A>", b" the", b"cat", b" "]
    write(t, "tokenizer7", bytes([len(pieces) << 1 | 1]) + llama2c_tokenizer(pieces))


def bench_seeds():
    t = "fuzz_bench_parsers"
    chunk = '{"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":%s}]}'
    stream = "".join(f"data: {chunk % (w, 'null')}\n\n" for w in ["Hel", "lo", " there"])
    stream += "data: " + chunk % ("", '"stop"') + "\n\n"
    stream += ('data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,'
               '"prompt_tokens_details":{"cached_tokens":8}}}\n\ndata: [DONE]\n\n')
    write(t, "openai_stream", bytes([3, 7, 1, 30]) + stream.encode())
    llamacpp = (': keep-alive\r\n\r\ndata: {"choices":[{"text":"Once","finish_reason":null}]}\r\n\r\n'
                'data: {"choices":[{"text":" upon","finish_reason":"length"}],\r\n'
                'data: "timings":{"prompt_n":20,"cache_n":44,"prompt_ms":12.5,"predicted_ms":40.0}}'
                '\r\n\r\nevent: end\rdata: [DONE]\r\r')
    write(t, "llamacpp_crlf", bytes([2, 5, 0]) + llamacpp.encode())
    body = ('{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"Paris.",'
            '"finish_reason":"stop"}],"usage":{"prompt_tokens":6,"completion_tokens":2},'
            '"timings":{"queue_ms":0.5,"prompt_ms":3.25,"ttft_ms":4.0,"cached_tokens":0}}')
    write(t, "full_body", bytes([0]) + body.encode())
    # Regression: counts outside int64 and a prompt_n + cache_n overflow.
    write(t, "huge_counts", bytes([0]) + b'{"choices":[{"text":"x"}],"usage":{"prompt_tokens":1e300,'
          b'"completion_tokens":18446744073709551615},"timings":{"prompt_n":9223372036854775807,'
          b'"cache_n":1}}')
    write(t, "error_event", bytes([1, 9]) + b'data: {"error":{"message":"server overloaded"}}\n\n'
          b'data: {"error":"bad"}\ndata\n\n')


if __name__ == "__main__":
    tokenizer_seeds()
    chat_seeds()
    llama2c_seeds()
    bench_seeds()
