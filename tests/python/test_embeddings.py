"""Embeddings over HTTP: POST /v1/embeddings (and /embeddings), llama.cpp's
POST /embedding, on the tiny synthetic llama.

The vectors are checked against the NumPy reference (reference_forward.py):
the final norm's output at each prompt position, pooled (mean, or the last
position) and L2-normalised.

Tolerance: the tiny model's matrices are Q8_0, so tokenmill's optimised
kernels quantize the activations to int16 blocks on the fly (the "integer
paths" of test_arch_reference.py, whose logits land 3e-4 .. 5e-4 from the
reference). The pooled final-norm outputs carry the same ~1e-3 relative
error: after L2 normalisation each of the 64 components is ~0.1 and was
observed within 1.2e-4 of the reference, the cosine distance within 5e-8.
Components are held to 1e-3 and the cosine distance to 1e-6 (8x and 20x
margins). The wrong vectors are far outside: the other pooling differs by
~0.25 per component, and leaving out the final norm's learned weight
(close to 1 in the synthetic model) moves the cosine distance to ~1.5e-4; test_reference_tolerance_discriminates
checks both, so the comparison cannot pass for the wrong vector.
"""
import base64
import json

import numpy as np
import pytest

from reference_forward import ReferenceModel
from test_server_common import Server

TOLERANCE = 1e-3
COSINE_TOLERANCE = 1e-6
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Embeddings are pooled hidden states.", "a b c d e f g"]


@pytest.fixture(scope="module")
def server(tokenmill_bin, tiny):
    with Server(tokenmill_bin, tiny, "-t", "2", "--kv-memory", "16M", "--model-alias", "tiny-embed") as s:
        yield s


@pytest.fixture(scope="module")
def reference(tiny):
    return ReferenceModel(tiny)


def tokens_of(server, text):
    r = server.http.post("/tokenize", json={"prompt": text})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def embed(server, body, path="/v1/embeddings"):
    r = server.http.post(path, json=body)
    assert r.status_code == 200, r.text
    return r.json()


def vectors(body):
    assert body["object"] == "list"
    assert [d["index"] for d in body["data"]] == list(range(len(body["data"])))
    assert all(d["object"] == "embedding" for d in body["data"])
    return [np.asarray(d["embedding"], dtype=np.float64) for d in body["data"]]


def expected(reference, ids, pooling):
    h = reference.hidden_states(ids)
    v = h.mean(axis=0) if pooling == "mean" else h[-1]
    return v / np.linalg.norm(v)


def assert_close(got, want):
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) < TOLERANCE, np.max(np.abs(got - want))
    assert float(got @ want) / np.linalg.norm(got) > 1 - COSINE_TOLERANCE
    assert abs(np.linalg.norm(got) - 1.0) < 1e-5


def test_mean_pooling_matches_numpy_reference(server, reference):
    body = embed(server, {"input": TEXTS[0], "model": "tiny-embed"})
    assert body["model"] == "tiny-embed"
    ids = tokens_of(server, TEXTS[0])
    [got] = vectors(body)
    assert len(got) == reference.n_embd
    assert_close(got, expected(reference, ids, "mean"))
    assert body["usage"] == {"prompt_tokens": len(ids), "total_tokens": len(ids)}


def test_last_pooling_matches_numpy_reference(tokenmill_bin, tiny, reference):
    with Server(tokenmill_bin, tiny, "-t", "2", "--kv-memory", "16M", "--pooling", "last") as last:
        for text in TEXTS[:2]:
            [got] = vectors(embed(last, {"input": text}))
            assert_close(got, expected(reference, tokens_of(last, text), "last"))
        # Last pooling takes prefix-cache hits: a repeat still answers the same.
        [again] = vectors(embed(last, {"input": TEXTS[0]}))
        assert_close(again, expected(reference, tokens_of(last, TEXTS[0]), "last"))


def test_reference_tolerance_discriminates(server, reference):
    ids = tokens_of(server, TEXTS[1])
    [got] = vectors(embed(server, {"input": TEXTS[1]}))
    wrong_pooling = expected(reference, ids, "last")
    assert np.max(np.abs(got - wrong_pooling)) > 20 * TOLERANCE
    # Without the final norm's weight the vector points elsewhere.
    h = reference.hidden_states(ids) / reference.output_norm
    pre_norm = h.mean(axis=0) / np.linalg.norm(h.mean(axis=0))
    assert 1 - float(got @ pre_norm) > 20 * COSINE_TOLERANCE


def test_batch_equals_one_by_one_and_usage_counts_tokens(server, reference):
    body = embed(server, {"input": TEXTS})
    batched = vectors(body)
    assert len(batched) == len(TEXTS)
    total = 0
    for text, v in zip(TEXTS, batched):
        ids = tokens_of(server, text)
        total += len(ids)
        [alone] = vectors(embed(server, {"input": text}))
        assert np.max(np.abs(alone - v)) < 1e-5
        assert_close(v, expected(reference, ids, "mean"))
    assert body["usage"] == {"prompt_tokens": total, "total_tokens": total}


def test_token_inputs_equal_text_inputs(server):
    ids = [tokens_of(server, t) for t in TEXTS[:2]]
    text_vectors = vectors(embed(server, {"input": TEXTS[:2]}))
    token_vectors = vectors(embed(server, {"input": ids}))
    single = vectors(embed(server, {"input": ids[0]}))
    for a, b in zip(text_vectors, token_vectors):
        assert np.max(np.abs(a - b)) < 1e-5
    assert np.max(np.abs(single[0] - text_vectors[0])) < 1e-5


def test_base64_decodes_to_the_same_floats(server):
    [as_float] = vectors(embed(server, {"input": TEXTS[2], "encoding_format": "float"}))
    body = embed(server, {"input": TEXTS[2], "encoding_format": "base64"})
    raw = base64.b64decode(body["data"][0]["embedding"])
    as_b64 = np.frombuffer(raw, dtype="<f4")
    assert as_b64.shape == as_float.shape
    # The JSON numbers are written to read back as the same float32.
    assert np.array_equal(as_b64, as_float.astype(np.float32))


def test_official_client(server, reference):
    client = server.client()
    # The client asks for base64 unless told otherwise, and decodes it.
    r = client.embeddings.create(model="tiny-embed", input=TEXTS[:2])
    assert [d.index for d in r.data] == [0, 1]
    assert r.usage.prompt_tokens == sum(len(tokens_of(server, t)) for t in TEXTS[:2])
    for text, d in zip(TEXTS[:2], r.data):
        assert_close(np.asarray(d.embedding), expected(reference, tokens_of(server, text), "mean"))
    f = client.embeddings.create(model="tiny-embed", input=TEXTS[0], encoding_format="float",
                                 dimensions=reference.n_embd)
    assert np.array_equal(np.asarray(f.data[0].embedding, dtype=np.float32),
                          np.asarray(r.data[0].embedding, dtype=np.float32))


def test_routes_without_v1_and_llama_cpp_shape(server):
    [v1] = vectors(embed(server, {"input": TEXTS[0]}))
    [plain] = vectors(embed(server, {"input": TEXTS[0]}, path="/embeddings"))
    assert np.array_equal(v1, plain)
    llama = embed(server, {"content": TEXTS[0]}, path="/embedding")
    assert isinstance(llama, list) and len(llama) == 1
    assert llama[0]["index"] == 0
    assert len(llama[0]["embedding"]) == 1  # one pooled vector, in a list as llama.cpp writes it
    assert np.array_equal(np.asarray(llama[0]["embedding"][0]), v1)
    many = embed(server, {"content": TEXTS[:2], "embd_normalize": 2}, path="/embedding")
    assert [m["index"] for m in many] == [0, 1]


def error_of(server, body, path="/v1/embeddings"):
    r = server.http.post(path, json=body)
    assert r.status_code == 400, r.text
    return r.json()["error"]


def test_errors_are_clean_400s(server):
    assert error_of(server, {"input": ""})["param"] == "input"
    assert error_of(server, {"input": []})["param"] == "input"
    assert error_of(server, {"model": "tiny"})["param"] == "input"
    assert error_of(server, {"input": "x", "encoding_format": "int8"})["param"] == "encoding_format"
    e = error_of(server, {"input": "x", "dimensions": 32})
    assert e["param"] == "dimensions" and "64" in e["message"]
    long_input = [5] * 256  # the tiny model's whole context: no room left
    e = error_of(server, {"input": ["short", long_input]})
    assert e["param"] == "input" and e["code"] == "context_length_exceeded"
    assert "input[1]" in e["message"] and "256" in e["message"]
    e = error_of(server, {"input": "x " * 5000})
    assert e["param"] == "input" and e["code"] == "context_length_exceeded"
    assert error_of(server, {"input": [1, 999999]})["param"] == "input"
    assert error_of(server, {"input": "x", "pooling": "last"})["param"] == "pooling"
    assert error_of(server, {"content": ""}, path="/embedding")["param"] == "content"
    r = server.http.post("/v1/embeddings", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and json.loads(r.text)["error"]["type"] == "invalid_request_error"
    r = server.http.post("/v1/embeddings", json={"input": "x", "model": "nope"})
    assert r.status_code == 404
    # The server still answers after every refusal.
    assert len(vectors(embed(server, {"input": "still here"}))) == 1


def test_bad_pooling_flag_is_refused(tokenmill_bin, tiny):
    from conftest import run_tokenmill
    proc = run_tokenmill(tokenmill_bin, "serve", "-m", tiny, "--port", "0", "--pooling", "cls", check=False,
                         timeout=60)
    assert proc.returncode != 0
    assert "--pooling" in proc.stderr and "cls" in proc.stderr


def test_metrics_count_embeddings(server):
    before = server.metrics()
    body = embed(server, {"input": TEXTS[:2]})
    tokens = body["usage"]["prompt_tokens"]
    key = 'tokenmill_http_responses_total{endpoint="/v1/embeddings",code="200"}'
    m = server.wait_metric(lambda m: m["tokenmill_embedding_requests_total"]
                           - before["tokenmill_embedding_requests_total"] == 2)
    assert m["tokenmill_embedding_prompt_tokens_total"] - before["tokenmill_embedding_prompt_tokens_total"] == tokens
    assert m[key] - before.get(key, 0) == 1
    # Nothing was generated for them.
    assert m["tokenmill_generation_tokens_total"] == before["tokenmill_generation_tokens_total"]
    log = server.wait_events(lambda e: e.get("event") == "request" and e["path"] == "/v1/embeddings"
                             and e.get("prompt_tokens") == tokens)
    assert log[-1]["status"] == 200 and log[-1]["id"].startswith("embd-") and log[-1]["choices"] == 2
    assert log[-1]["completion_tokens"] == 0
