"""`tokenmill bench serve` against servers that close kept-alive connections
without a "Connection: close" header (as llama.cpp's llama-server does,
after an idle time or a number of requests): the driver resends a request
whose connection turns out closed before any response byte, counts it, and
still records a response cut off mid-way as a transport error. The fake
OpenAI-compatible server (fake_openai_server.py) closes connections on
demand and counts the requests it read and the connections it accepted."""
import urllib.request

import pytest

from test_bench_serve import bench_serve, fake, load_report, records, write_spec  # noqa: F401 (fake: a fixture)


def fake_metrics(server):
    """The fake server's own counters: requests it read, connections it accepted."""
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as f:
        text = f.read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {"requests": int(values['fake_requests_total{kind="all"}']),
            "connections": int(values["fake_connections_total"])}


@pytest.mark.parametrize("closing", [["--close-after", "3"], ["--idle-close-ms", "40"]], ids=["after_3", "idle_40ms"])
def test_reconnects_when_the_server_closes_kept_alive_connections(tokenmill_bin, fake, tmp_path, closing):
    # Servers close kept-alive connections without a "Connection: close"
    # header (llama-server after an idle time or a number of requests); a
    # client that reuses such a socket sees its write or read fail before
    # any response byte. Before the driver retried, such runs measured 6
    # transport errors in 48 requests (after 3) and 4 (idle 50 ms, clients
    # idle 50 ms); with it, 3-6 and 4-10 requests here are resent.
    server = fake("--ttft-ms", "2", "--itl-ms", "1", *closing)
    # Clients idle as long as the server waits, so its close and their next
    # send race (idle longer, and the client sees the close before it sends).
    think = 0.04 if closing[0] == "--idle-close-ms" else 0.0
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [1, 4], "arrival": "closed_loop", "requests_per_cell": 24,
                               "length_buckets": [[8, 16]], "output_buckets": [[4, 4]], "think_time_s": think},
                      prompts={"token_counter": "words"})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    recs = records(out)
    assert [r["status"] for r in recs] == ["ok"] * 48, [(r["status"], r["error"]) for r in recs if r["error"]]
    seen = fake_metrics(server)
    # Every request reached the server once: a stale socket fails before the
    # server reads the request, so a retry never sends one twice.
    assert seen["requests"] == 48, seen
    assert seen["connections"] >= 12, seen  # the server did close connections (>= 48 / 4 with 4 clients)
    resent = sum(r["reconnects"] for r in recs)
    assert all(r["reconnects"] in (0, 1) for r in recs)
    assert load_report(out)["overall"]["requests"]["reconnected"] == resent
    print(f"\n{resent} of 48 requests resent on a fresh connection, {seen['connections']} connections")


def test_a_response_cut_off_midway_is_a_transport_error(tokenmill_bin, fake, tmp_path):
    # The server closes the socket in the middle of every 4th stream (after
    # its headers and half its tokens), and closes connections after 3
    # requests too: the cut responses stay transport errors, never retried.
    server = fake("--ttft-ms", "2", "--itl-ms", "1", "--drop-every", "4", "--close-after", "3")
    spec = write_spec(tmp_path,
                      traffic={"concurrency": [1], "arrival": "closed_loop", "requests_per_cell": 24,
                               "length_buckets": [[8, 16]], "output_buckets": [[6, 6]]},
                      prompts={"token_counter": "words"})
    out = tmp_path / "out"
    bench_serve(tokenmill_bin, spec, server.url, out)
    recs = records(out)
    for k, r in enumerate(recs, start=1):  # one client: the k-th request the server sees is the k-th planned
        if k % 4 == 0:
            # (Its `reconnects` may be 1: the connection closed after the
            # 3rd request, so the 4th itself went out on a fresh one.)
            assert (r["status"], r["error"], r["http_status"]) == ("error", "transport: Read", 200), r
            assert len(r["chunk_ms"]) == 3  # the half that arrived
        else:
            assert r["status"] == "ok", r
    assert fake_metrics(server)["requests"] == 24  # nothing was sent twice
    assert load_report(out)["overall"]["requests"]["error"] == 6
