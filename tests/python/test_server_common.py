"""Helpers for the `tokenmill serve` tests: start a real server on a free
port (--port 0; the chosen URL is read from its first log line), talk to it
with httpx and the official openai client, read its metrics and its JSON
log, stop it with a signal. No tests here."""
import json
import os
import signal
import subprocess
import tempfile
import time

import http.client
import urllib.parse

import openai

from conftest import SANITIZER_MARKERS


def parse_metrics(text):
    """Prometheus text -> {'name{labels}': value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
    return out


class Response:
    def __init__(self, status, headers, body):
        self.status_code = status
        self.headers = headers  # lower-case names
        self.content = body
        self.text = body.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.text)


class Http:
    """A tiny HTTP/1.1 client (the stdlib's), one connection per request."""

    def __init__(self, base, timeout=60):
        u = urllib.parse.urlsplit(base)
        self.host, self.port, self.timeout = u.hostname, u.port, timeout

    def connect(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def request(self, method, path, content=None, json_body=None, headers=None):
        headers = dict(headers or {})
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers.setdefault("Content-Type", "application/json")
        conn = self.connect()
        try:
            conn.request(method, path, body=content, headers=headers)
            r = conn.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            conn.close()

    def get(self, path, headers=None):
        return self.request("GET", path, headers=headers)

    def post(self, path, content=None, json=None, headers=None):  # noqa: A002 - httpx's spelling
        return self.request("POST", path, content=content, json_body=json, headers=headers)


class LoggedProcess:
    """A process whose stderr (a JSON log, one event per line) goes to
    self.log_file."""

    def log_text(self):
        with open(self.log_file.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def events(self):
        out = []
        for line in self.log_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line still being written
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close()

    def close(self):
        self.log_file.close()
        if os.path.exists(self.log_file.name):
            os.unlink(self.log_file.name)

    def __enter__(self):
        return self


class Server(LoggedProcess):
    """A `tokenmill serve` process. Its stderr (the JSON log) goes to a file,
    so a chatty server can never block on a full pipe."""

    def __init__(self, binary, model, *args, ready=True, timeout=120, launcher=()):
        """launcher: a command the server runs under, e.g. ["mpirun", "-np", "2"]."""
        self.log_file = tempfile.NamedTemporaryFile("w+", prefix="tokenmill-serve-", suffix=".log", delete=False)
        cmd = [*launcher, binary, "serve", "-m", model, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log_file)
        self.base = None
        deadline = time.time() + timeout
        while self.base is None:
            for e in self.events():
                if e.get("event") == "listening":
                    self.base = e["url"]
            if self.proc.poll() is not None:
                raise AssertionError(f"tokenmill serve exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.time() > deadline:
                self.kill()
                raise AssertionError(f"tokenmill serve did not start listening:\n{self.log_text()}")
            time.sleep(0.02)
        self.http = Http(self.base)
        if ready:
            self.wait_ready(deadline)

    def wait_ready(self, deadline):
        while True:
            try:
                if self.http.get("/health").status_code == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"tokenmill serve never became ready:\n{self.log_text()}")
            time.sleep(0.05)

    def client(self, api_key="unused", **kw):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=api_key, max_retries=0, timeout=120, **kw)

    def metrics(self):
        r = self.http.get("/metrics")
        assert r.status_code == 200, r.text
        return parse_metrics(r.text)

    def wait_metric(self, predicate, timeout=10.0):
        """Polls /metrics until predicate(metrics) holds; returns the metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if predicate(m):
                return m
            if time.time() > deadline:
                raise AssertionError(f"metrics never satisfied the condition; last: "
                                     f"{ {k: v for k, v in m.items() if 'bucket' not in k} }")
            time.sleep(0.02)

    def wait_events(self, predicate, count=1, timeout=10.0):
        """Waits until `count` log events satisfy predicate (log lines are
        written just after a response is sent); returns them all."""
        deadline = time.time() + timeout
        while True:
            found = [e for e in self.events() if predicate(e)]
            if len(found) >= count:
                return found
            if time.time() > deadline:
                raise AssertionError(f"found {len(found)} of {count} log events:\n{self.log_text()[-3000:]}")
            time.sleep(0.02)


    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends sig and returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


    def __exit__(self, exc_type, *exc):
        """Stops the server. After a test that passed, a server still running
        must exit cleanly on SIGTERM, and no sanitizer may have reported
        anything in its log: under the ASan and TSan builds that is how a
        race or a leak in the server fails the test that caused it."""
        status = None
        if exc_type is None and self.proc.poll() is None:
            try:
                status = self.stop(signal.SIGTERM, timeout=120)
            except subprocess.TimeoutExpired:
                status = "no exit within 120 s of SIGTERM"
        log = self.log_text()
        self.kill()
        if exc_type is None:
            reports = [m for m in SANITIZER_MARKERS if m in log]
            assert not reports, f"sanitizer report in the server log ({reports}):\n{log[-6000:]}"
            assert status in (None, 0), f"tokenmill serve exit status {status} after SIGTERM:\n{log[-3000:]}"



def sse_events(body):
    """Splits a raw SSE body into its events' data strings; checks that every
    event is exactly one `data: ` line (or a `:` comment, dropped)."""
    assert body.endswith("\n\n"), repr(body[-40:])
    out = []
    for block in body[:-2].split("\n\n"):
        lines = block.split("\n")
        if all(line.startswith(":") for line in lines):
            continue
        assert len(lines) == 1 and lines[0].startswith("data: "), repr(block)
        out.append(lines[0][len("data: "):])
    return out
