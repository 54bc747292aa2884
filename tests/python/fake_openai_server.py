"""A small fake OpenAI-compatible server for testing `tokenmill bench serve`.

It streams completions as server-sent events with controllable delays, so a
test knows the true TTFT and inter-token latency and can check what the
driver measured. Also: /tokenize (a toy tokenizer: whitespace words, words
of 7+ letters count as two tokens), /v1/models, /metrics (Prometheus text
with prefix-cache counters), a simulated prefix cache (16-token blocks), a
limited number of slots (queueing shows in timings.queue_ms), a fixed
service time per request (--service-ms: with --slots S the server carries
exactly S / service time requests per second, and above that its queue and
TTFT grow without bound: a server of known capacity), and failure
injection (429 rejections, 500 errors, mid-stream OOM errors, stalls,
responses cut off mid-way) and keep-alive connections closed the way some
servers close them: after N requests or after an idle time, without a
"Connection: close" header.

GET /debug/timings returns what the server itself observed of every
streamed completion, on its own monotonic clock (milliseconds): when the
request body had been read (`received_ms`) and when each text chunk was
handed to the socket (`chunk_ms`, stamped just before the write, so a
client cannot have received it earlier). A test compares the client's
TTFT and TPOT with these instead of with the configured delays, which a
loaded machine stretches for client and server alike.

Run: python3 fake_openai_server.py --port 0 [options]; it prints
"PORT <n>" on its first stdout line once it listens.
"""
import argparse
import hashlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BLOCK = 16


def toy_tokens(text):
    """Token strings of the toy tokenizer: long words split in two."""
    out = []
    for w in text.split():
        if len(w) >= 7:
            out += [w[: len(w) // 2], w[len(w) // 2:]]
        else:
            out.append(w)
    return out


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.slots = threading.Semaphore(args.slots) if args.slots > 0 else None
        self.request_count = 0
        self.blocks = set()
        self.hit_tokens = 0
        self.miss_tokens = 0
        self.disconnects = 0
        self.connections = 0
        self.in_flight = 0
        self.timings = []  # one dict per streamed completion, see /debug/timings
        self.log = open(args.log, "a") if args.log else None

    def next_request(self, body):
        with self.lock:
            self.request_count += 1
            if self.log:
                self.log.write(json.dumps(body, sort_keys=True) + "\n")
                self.log.flush()
            return self.request_count

    def count_connection(self):
        with self.lock:
            self.connections += 1

    def start_timing(self, k, prompt, received):
        """The timing record of request k, filled in as its chunks are sent."""
        rec = {"k": k, "prompt": prompt, "received_ms": received * 1000.0, "chunk_ms": []}
        with self.lock:
            self.timings.append(rec)
        return rec

    def timings_json(self):
        with self.lock:
            return {"clock": "monotonic", "requests": [dict(r, chunk_ms=list(r["chunk_ms"])) for r in self.timings]}

    def prefix_lookup(self, tokens):
        """Cached tokens = the full 16-token blocks already seen, from the start."""
        with self.lock:
            cached = 0
            h = hashlib.sha256()
            keys = []
            for b in range(len(tokens) // BLOCK):
                h.update(("\x00".join(tokens[b * BLOCK:(b + 1) * BLOCK]) + "\x01").encode())
                keys.append(h.hexdigest())
            for k in keys:
                if k not in self.blocks:
                    break
                cached += BLOCK
            self.blocks.update(keys)
            self.hit_tokens += cached
            self.miss_tokens += len(tokens) - cached
            return cached


def every(n, k):
    return n > 0 and k % n == 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE writes must leave at once

    def log_message(self, fmt, *a):  # quiet
        pass

    def setup(self):
        # The idle keep-alive timeout: a socket timeout while waiting for the
        # next request line ends the connection (BaseHTTPRequestHandler
        # catches it). Set per connection, before the streams are made.
        idle_ms = self.server.state.args.idle_close_ms
        if idle_ms > 0:
            self.timeout = idle_ms / 1000
        super().setup()
        self.served = 0
        self.server.state.count_connection()

    def handle_one_request(self):
        super().handle_one_request()
        self.served += 1
        close_after = self.state.args.close_after
        if close_after > 0 and self.served >= close_after:
            # Closed without saying so: the client learns it only when its
            # next request on this connection finds the socket gone.
            self.close_connection = True

    @property
    def state(self):
        return self.server.state

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n) if n else b""
        self.received = time.monotonic()  # the whole request is in: the server's TTFT starts here
        try:
            return json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return None

    def do_GET(self):
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        elif self.path == "/health":  # as tokenmill serve answers it (the router polls it)
            self.send_json(200, {"status": "ok"})
        elif self.path == "/debug/timings":
            self.send_json(200, self.state.timings_json())
        elif self.path == "/metrics":
            s = self.state
            text = (
                "# TYPE tokenmill_prefix_cache_hit_tokens_total counter\n"
                f"tokenmill_prefix_cache_hit_tokens_total {s.hit_tokens}\n"
                f"tokenmill_prefix_cache_miss_tokens_total {s.miss_tokens}\n"
                f"process_resident_memory_bytes {100_000_000 + 1_000_000 * s.in_flight}\n"
                f"fake_client_disconnects_total {s.disconnects}\n"
                f"fake_connections_total {s.connections}\n"
                f'fake_requests_total{{kind="all"}} {s.request_count}\n'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        body = self.read_body()
        if body is None:
            self.send_json(400, {"error": {"message": "bad json"}})
        elif self.path == "/tokenize":
            self.tokenize(body)
        elif self.path in ("/v1/completions", "/v1/chat/completions"):
            self.complete(body, chat=self.path.endswith("chat/completions"))
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def tokenize(self, body):
        key = "content" if self.state.args.tokenize_shape == "llama" else "prompt"
        if key not in body or set(body) - {key, "model", "add_special", "add_special_tokens"}:
            self.send_json(400, {"error": {"message": f"expected '{key}'"}})
            return
        toks = toy_tokens(body[key])
        self.send_json(200, {"tokens": list(range(len(toks))), "count": len(toks)})

    def complete(self, body, chat):
        a = self.state.args
        k = self.state.next_request(body)
        if every(a.reject_every, k):
            self.send_json(429, {"error": {"message": "overloaded, retry later"}})
            return
        if every(a.error_every, k):
            self.send_json(500, {"error": {"message": "internal failure"}})
            return
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        tokens = toy_tokens(prompt)
        n = int(body.get("max_tokens", 16))
        t0 = time.monotonic()
        if self.state.slots:
            self.state.slots.acquire()
        try:
            queue_ms = (time.monotonic() - t0) * 1000
            cached = self.state.prefix_lookup(tokens)
            prefill_ms = a.ttft_ms + a.prefill_ms_per_token * (len(tokens) - cached)
            self.state.in_flight += 1
            if body.get("stream"):
                timing = self.state.start_timing(k, prompt, self.received)
                self.stream(body, chat, k, n, len(tokens), cached, queue_ms, prefill_ms, timing)
            else:
                time.sleep((a.service_ms or prefill_ms + a.itl_ms * (n - 1)) / 1000)
                self.send_json(200, self.final_object(chat, n, len(tokens), cached, queue_ms, prefill_ms, " tok" * n))
        finally:
            self.state.in_flight -= 1
            if self.state.slots:
                self.state.slots.release()

    def final_object(self, chat, n, n_prompt, cached, queue_ms, prefill_ms, text):
        usage = {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        choice = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {"object": "text_completion", "choices": [choice], "usage": usage,
                "timings": {"queue_ms": queue_ms, "prompt_ms": prefill_ms, "ttft_ms": queue_ms + prefill_ms}}

    def drop_connection(self):
        """Cuts the response off: the socket closes mid-body, no last chunk."""
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def chunk(self, payload):
        data = f"data: {payload}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def stream(self, body, chat, k, n, n_prompt, cached, queue_ms, prefill_ms, timing):
        a = self.state.args
        start = time.monotonic()  # the deadlines below count from here
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        itl_ms = a.itl_ms
        if a.service_ms > 0:  # the whole request holds its slot for service_ms, whatever its length
            itl_ms = max(0.0, a.service_ms - prefill_ms) / max(1, n - 1)

        def wait_for_token(i):
            if a.service_ms > 0:
                # Token i waits for its own deadline from the start, so the
                # time spent writing chunks (longer on a busy machine) does
                # not add up: the request holds its slot for service_ms, not
                # service_ms plus n writes (a capacity test measured 36
                # instead of 40 req/s so).
                time.sleep(max(0.0, start + (prefill_ms + i * itl_ms) / 1000 - time.monotonic()))
            else:  # each gap is itl_ms (the latency tests measure the gaps)
                time.sleep((itl_ms if i else prefill_ms) / 1000)

        try:
            for i in range(n):
                wait_for_token(i)
                if every(a.stall_every, k) and i == n // 2:
                    time.sleep(3600)
                if every(a.drop_every, k) and i == n // 2:
                    self.drop_connection()
                    return
                if every(a.oom_every, k) and i == n // 2:
                    self.chunk(json.dumps({"error": {"message": "out of memory: KV cache exhausted"}}))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                piece = {"index": 0, "finish_reason": "length" if i == n - 1 else None}
                if chat:
                    piece["delta"] = {"content": " tok"}
                else:
                    piece["text"] = " tok"
                data = json.dumps({"object": "text_completion.chunk", "choices": [piece]})
                timing["chunk_ms"].append(time.monotonic() * 1000.0)  # list.append is atomic under the GIL
                self.chunk(data)
            if body.get("stream_options", {}).get("include_usage"):
                final = self.final_object(chat, n, n_prompt, cached, queue_ms, prefill_ms, "")
                final["choices"] = []
                self.chunk(json.dumps(final))
            self.chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self.state.lock:
                self.state.disconnects += 1
            self.close_connection = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=50.0, help="fixed prefill delay")
    p.add_argument("--prefill-ms-per-token", type=float, default=0.0, help="extra delay per uncached prompt token")
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--slots", type=int, default=0, help="requests served at once; 0 = unlimited")
    p.add_argument("--service-ms", type=float, default=0.0,
                   help="time each request holds its slot (first token after --ttft-ms, the rest spread evenly); "
                        "0 = --ttft-ms + --itl-ms per further token")
    p.add_argument("--reject-every", type=int, default=0)
    p.add_argument("--error-every", type=int, default=0)
    p.add_argument("--oom-every", type=int, default=0)
    p.add_argument("--stall-every", type=int, default=0)
    p.add_argument("--drop-every", type=int, default=0, help="cut every n-th stream off mid-way (socket closed)")
    p.add_argument("--close-after", type=int, default=0,
                   help="close a keep-alive connection after n requests, without a Connection: close header")
    p.add_argument("--idle-close-ms", type=float, default=0.0, help="close a keep-alive connection idle this long")
    p.add_argument("--tokenize-shape", choices=["openai", "llama"], default="openai")
    p.add_argument("--log", default="", help="append every completion request body (JSON) to this file")
    args = p.parse_args()
    ThreadingHTTPServer.request_queue_size = 256  # listen() backlog: 64+ clients connect at once
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.state = State(args)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
