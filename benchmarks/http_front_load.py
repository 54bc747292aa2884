#!/usr/bin/env python3
"""Connection load on `tokenmill serve`'s HTTP front end: N idle keep-alive
connections and M concurrent streams at once, with a probe client's
/health latency measured before and during, and the server's memory,
threads and connection gauges. Prints one line per phase.

    benchmarks/http_front_load.py --bin build/src/cli/tokenmill -m MODEL.gguf \\
        [--idle 1000] [--streams 256] [--tokens 64]

Any OpenAI-compatible streaming works; the model only needs a tokenizer.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def start_server(binary, model, args):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--quiet", *args],
                            stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 120
    port = None
    while time.time() < deadline:
        with open(log.name) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "listening":
                    port = int(e["url"].rsplit(":", 1)[1])
                if e.get("event") == "ready" and port:
                    return proc, port, log.name
        if proc.poll() is not None:
            sys.exit(f"server exited: {open(log.name).read()}")
        time.sleep(0.05)
    sys.exit("server did not become ready")


def get(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data


def probe(port, n=21):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        assert b" 200 " in get(port, "/health")[:20]
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), max(times)


def metric(port, name):
    for line in get(port, "/metrics").decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return f"RSS {int(out['VmRSS'].split()[0]) // 1024} MiB, threads {out['Threads']}"


def stream(port, tokens, results, i):
    body = json.dumps({"prompt": "hello", "max_tokens": tokens, "ignore_eos": True, "stream": True}).encode()
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    data, first = b"", None
    while not data.endswith(b"0\r\n\r\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        if first is None and b"data: {" in chunk:
            first = time.perf_counter() - t0
        data += chunk
    s.close()
    results[i] = (b"[DONE]" in data, first, time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", default="1", help="the server's compute threads")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    proc, port, log = start_server(a.bin, a.model, [
        "-t", a.threads, "--kv-memory", "256M", "--max-seqs", str(a.streams), "--max-batch-tokens",
        str(max(512, a.streams)), "--max-connections-per-client", str(a.idle + a.streams + 64),
        "--keep-alive-timeout", "300"])
    try:
        med, worst = probe(port)
        print(f"idle server: /health median {med:.2f} ms, max {worst:.2f} ms; {proc_status(proc.pid)}")
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(a.idle)]
        time.sleep(0.5)
        med, worst = probe(port)
        print(f"{a.idle} idle keep-alive connections: /health median {med:.2f} ms, max {worst:.2f} ms; "
              f"{proc_status(proc.pid)}; connections open {metric(port, 'tokenmill_http_connections_open'):.0f}")
        results = [None] * a.streams
        threads = [threading.Thread(target=stream, args=(port, a.tokens, results, i)) for i in range(a.streams)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(0.5)
        med, worst = probe(port, 9)
        running = metric(port, "tokenmill_requests_running")
        status = proc_status(proc.pid)
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        done = sum(1 for r in results if r and r[0])
        ttft = sorted(r[1] for r in results if r and r[1] is not None)
        print(f"{a.streams} concurrent streams of {a.tokens} tokens beside the idle ones: {done} completed in "
              f"{wall:.1f} s ({done * a.tokens / wall:.0f} tok/s); TTFT p50 {ttft[len(ttft) // 2] * 1000:.0f} ms, "
              f"p99 {ttft[int(len(ttft) * 0.99)] * 1000:.0f} ms; running {running:.0f} at the probe; /health "
              f"median {med:.2f} ms, max {worst:.2f} ms; {status}; handler threads "
              f"{metric(port, 'tokenmill_http_worker_threads'):.0f}")
        for s in idle:
            s.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        os.unlink(log)


if __name__ == "__main__":
    main()
