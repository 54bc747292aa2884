"""The extension request fields of /v1/completions and /v1/chat/completions
(vLLM's, llama.cpp's and OpenAI's newer names) on the tiny synthetic model,
through the official openai client (extra_body) and raw requests: each
field's effect is observed in the output, each refusal names its field, and
a typo gets a did-you-mean. Reference outputs come from the same server
without the field (or with its standard spelling), never from constants."""
import math

import openai
import pytest

from test_server_common import Server

PROMPT = "Once upon a time there was"


@pytest.fixture(scope="module")
def server(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "--chat-template", "chatml", "-t", "1", "--kv-memory", "32M") as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.client()


@pytest.fixture(scope="module")
def words(server):
    """Token ids of three whole words, as they follow other text."""
    r = server.http.post("/tokenize", json={"prompt": "cat dog the", "add_special_tokens": False, "with_pieces": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pieces"] == [" cat", " dog", " the"], body  # one token each in the built-in vocabulary
    return dict(zip(["cat", "dog", "the"], body["tokens"]))


def complete(client, **kw):
    extra = kw.pop("extra_body", {})
    kw.setdefault("temperature", 0)
    return client.completions.create(model="tiny", prompt=kw.pop("prompt", PROMPT), extra_body=extra, **kw)


def post_400(server, path, body, param):
    r = server.http.post(path, json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    return err["message"]


def test_typos_get_a_did_you_mean(server, client):
    msg = post_400(server, "/v1/completions", {"prompt": "x", "max_token": 5}, "max_token")
    assert msg.startswith("unrecognized request argument 'max_token' (did you mean 'max_tokens'?)"), msg
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}],
                                       extra_body={"stop_token_id": [1]})
    assert "did you mean 'stop_token_ids'?" in e.value.body["message"]
    msg = post_400(server, "/v1/completions", {"prompt": "x", "frobnicate": 1}, "frobnicate")
    assert "did you mean" not in msg


def test_unsupported_values_say_so(server):
    for field, value in [("use_beam_search", True), ("mirostat", 2), ("modalities", ["text", "audio"]),
                         ("samplers", ["temperature", "top_k"])]:
        msg = post_400(server, "/v1/completions", {"prompt": "x", field: value}, field)
        assert "is not supported" in msg and "unrecognized" not in msg, msg
    # Other chat_template_kwargs are template variables (enable_thinking
    # for Qwen3's template): accepted, whatever the template reads.
    r = server.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 1,
                                                       "chat_template_kwargs": {"enable_thinking": False}})
    assert r.status_code == 200, r.text


def test_hints_are_accepted_and_change_nothing(client):
    base = complete(client, max_tokens=8)
    hinted = complete(client, max_tokens=8, extra_body={
        "use_beam_search": False, "mirostat": 0, "reasoning_effort": "low", "modalities": ["text"],
        "prediction": {"type": "content", "content": "there was"}, "cache_prompt": True, "id_slot": -1,
        "timings_per_token": False, "samplers": ["penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"]})
    assert hinted.choices[0].text == base.choices[0].text


def test_min_tokens_holds_back_eos(client):
    eos_first = {"logit_bias": {"2": 50}}  # </s>: ends the output at once
    r = complete(client, max_tokens=10, extra_body=eos_first)
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 1 and r.choices[0].text == ""
    r = complete(client, max_tokens=10, extra_body={**eos_first, "min_tokens": 4})
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == 5 and r.choices[0].text != ""  # 4 tokens, then EOS
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, max_tokens=3, extra_body={"min_tokens": 4})
    assert e.value.body["param"] == "min_tokens"


def test_allowed_token_ids_limit_every_token(client, words):
    allowed = list(words.values())
    r = complete(client, max_tokens=20, temperature=1.0, seed=4, extra_body={"allowed_token_ids": allowed})
    assert r.usage.completion_tokens == 20  # EOS is not allowed either
    assert set(r.choices[0].text.split()) <= set(words), r.choices[0].text
    assert r.choices[0].text.startswith(" ")


def test_stop_token_ids_end_and_are_left_out(client, words):
    body = {"allowed_token_ids": list(words.values()), "stop_token_ids": [words["the"]],
            "logit_bias": {str(words["the"]): 1.5}}
    r = complete(client, max_tokens=40, temperature=1.0, seed=9, extra_body=body)
    c = r.choices[0]
    assert c.finish_reason == "stop"
    said = c.text.split()
    assert "the" not in said and set(said) <= {"cat", "dog"}
    assert r.usage.completion_tokens == len(said) + 1
    kept = complete(client, max_tokens=40, temperature=1.0, seed=9,
                    extra_body={**body, "include_stop_str_in_output": True})
    assert kept.choices[0].text == c.text + " the" and kept.choices[0].finish_reason == "stop"
    # min_tokens holds stop tokens back too.
    held = complete(client, max_tokens=40, temperature=1.0, seed=9,
                    extra_body={**body, "logit_bias": {str(words["the"]): 100}, "min_tokens": 3})
    assert held.usage.completion_tokens == 4 and len(held.choices[0].text.split()) == 3
    assert "the" not in held.choices[0].text


def test_include_stop_str_in_output_keeps_the_stop_string(client):
    full = complete(client, max_tokens=24, extra_body={"ignore_eos": True}).choices[0].text
    stop = full[len(full) // 2:len(full) // 2 + 3]
    cut = full[:full.index(stop)]
    r = complete(client, max_tokens=24, stop=[stop], extra_body={"ignore_eos": True})
    assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
    r = complete(client, max_tokens=24, stop=[stop], extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert r.choices[0].text == cut + stop and r.choices[0].finish_reason == "stop"


def test_bad_words_are_never_sampled(client):
    full = complete(client, max_tokens=24, logprobs=0, extra_body={"ignore_eos": True})
    tokens = full.choices[0].logprobs.tokens
    word = next(t for t in tokens if t.startswith(" ") and t.strip().isalpha())  # a whole-word token it uses
    r = complete(client, max_tokens=24, logprobs=0, extra_body={"ignore_eos": True, "bad_words": [word.strip()]})
    assert word not in r.choices[0].logprobs.tokens
    assert r.choices[0].text != full.choices[0].text


def test_special_tokens_shown_when_asked(client):
    bos = {"logit_bias": {"1": 100}}  # <s>: a control token that ends nothing
    assert complete(client, max_tokens=3, extra_body=bos).choices[0].text == ""
    shown = complete(client, max_tokens=3, extra_body={**bos, "skip_special_tokens": False}).choices[0].text
    assert shown == "<s> <s> <s>"
    tight = complete(client, max_tokens=3, extra_body={**bos, "skip_special_tokens": False,
                                                       "spaces_between_special_tokens": False})
    assert tight.choices[0].text == "<s><s><s>"


def test_prompt_logprobs_agree_with_echo(server, client):
    ids = server.http.post("/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    r = complete(client, max_tokens=1, extra_body={"prompt_logprobs": 2})
    pl = r.choices[0].model_extra["prompt_logprobs"]
    echo = complete(client, max_tokens=0, echo=True, logprobs=2).choices[0].logprobs
    assert len(pl) == len(ids) == len(echo.tokens) and pl[0] is None
    for i in range(1, len(ids)):
        entry = pl[i]
        assert 1 <= len(entry) <= 3
        mine = entry[str(ids[i])]
        assert math.isclose(mine["logprob"], echo.token_logprobs[i], abs_tol=1e-5)
        assert mine["decoded_token"] == echo.tokens[i] and mine["rank"] >= 1
        alternatives = sorted((v for v in entry.values() if v is not mine or v["rank"] <= 2),
                              key=lambda v: v["rank"])
        for v in alternatives:
            assert math.isclose(v["logprob"], echo.top_logprobs[i][v["decoded_token"]], abs_tol=1e-5)
        if mine["rank"] > 2:
            assert len(entry) == 3 and mine["logprob"] <= min(v["logprob"] for v in entry.values())
    # max_tokens 0 only scores; chat puts it at the top of the body.
    assert complete(client, max_tokens=0, extra_body={"prompt_logprobs": 0}).usage.completion_tokens == 0
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                          extra_body={"prompt_logprobs": 1})
    assert len(chat.model_extra["prompt_logprobs"]) == chat.usage.prompt_tokens
    msg = post_400(server, "/v1/completions", {"prompt": "x", "prompt_logprobs": 1, "stream": True}, "prompt_logprobs")
    assert "stream" in msg


def test_llama_cpp_names(server, client):
    base = complete(client, max_tokens=7, logprobs=2, extra_body={"ignore_eos": True, "repetition_penalty": 1.3})
    named = complete(client, extra_body={"n_predict": 7, "n_probs": 2, "ignore_eos": True, "repeat_penalty": 1.3})
    assert named.choices[0].text == base.choices[0].text and named.usage.completion_tokens == 7
    assert named.choices[0].logprobs.top_logprobs == base.choices[0].logprobs.top_logprobs
    window = complete(client, max_tokens=16, extra_body={"ignore_eos": True, "repeat_penalty": 1.5,
                                                          "repeat_last_n": 0})
    assert window.choices[0].text == complete(client, max_tokens=16, extra_body={"ignore_eos": True}).choices[0].text
    msg = post_400(server, "/v1/completions", {"prompt": "x", "n_predict": 5, "max_tokens": 6}, "n_predict")
    assert "differ" in msg
    until_full = complete(client, extra_body={"n_predict": -1, "ignore_eos": True})
    assert until_full.usage.prompt_tokens + until_full.usage.completion_tokens == 256  # the tiny model's context
    # typical_p that keeps one token per step makes sampling deterministic whatever the seed.
    texts = {complete(client, max_tokens=10, temperature=1.0, seed=s,
                      extra_body={"typical_p": 0.001, "ignore_eos": True}).choices[0].text for s in (1, 2, 3)}
    assert len(texts) == 1
    free = {complete(client, max_tokens=10, temperature=1.0, seed=s, extra_body={"ignore_eos": True}).choices[0].text
            for s in (1, 2, 3)}
    assert len(free) > 1


def test_prompt_truncation(server, client):
    long_prompt = "one two three four five six seven eight nine ten " * 40
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=long_prompt, max_tokens=8)
    assert e.value.body["code"] == "context_length_exceeded"
    kept = complete(client, prompt=long_prompt, max_tokens=8, extra_body={"n_keep": 4})
    assert kept.usage.prompt_tokens == 256 - 8
    last = complete(client, prompt=long_prompt, max_tokens=8, extra_body={"truncate_prompt_tokens": 20})
    assert last.usage.prompt_tokens == 20
    msg = post_400(server, "/v1/completions", {"prompt": long_prompt, "max_tokens": 8, "n_keep": 250}, "n_keep")
    assert "no room" in msg


def test_add_special_tokens(client):
    with_bos = complete(client, max_tokens=1).usage.prompt_tokens
    assert complete(client, max_tokens=1, extra_body={"add_special_tokens": False}).usage.prompt_tokens == with_bos - 1
    msgs = [{"role": "user", "content": "hi"}]
    chat = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=1).usage.prompt_tokens
    doubled = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=1,
                                             extra_body={"add_special_tokens": True}).usage.prompt_tokens
    assert doubled == chat + 1


def test_chat_template_fields(server, client):
    msgs = [{"role": "user", "content": "hi"}]
    full = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=1).usage.prompt_tokens
    bare = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=1,
                                          extra_body={"chat_template_kwargs": {"add_generation_prompt": False}})
    assert bare.usage.prompt_tokens < full
    # The last assistant message continued: the same as completing its rendered text.
    opened = msgs + [{"role": "assistant", "content": "Once upon a"}]
    cont = client.chat.completions.create(model="tiny", messages=opened, max_tokens=8, temperature=0,
                                          extra_body={"continue_final_message": True, "ignore_eos": True})
    rendered = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nOnce upon a"
    ref = complete(client, prompt=rendered, max_tokens=8, extra_body={"ignore_eos": True})
    assert cont.choices[0].message.content == ref.choices[0].text
    assert cont.usage.prompt_tokens == ref.usage.prompt_tokens
    msg = post_400(server, "/v1/chat/completions", {"messages": opened, "continue_final_message": True,
                                                    "add_generation_prompt": True}, "continue_final_message")
    assert "both" in msg
