#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_http_request_parser: small requests as a
client sends them on one connection, each after one byte that picks how the
target cuts them into pieces (see fuzz/fuzz_http_request_parser.cc). All
requests here are written for these seeds. Run from the repository root:
python3 fuzz/make_http_seeds.py"""
import os

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_http_request_parser")

SEEDS = {
    "get": (0, b"GET /v1/models?x=%20 HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n"),
    "post_content_length": (3, b"POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                               b"Content-Length: 16\r\n\r\n{\"prompt\":\"hi\"}\n"),
    "chunked_ext_trailers": (2, b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                                b"5;name=value\r\nhello\r\n6 ; q=\"a b\"\r\n world\r\n0\r\nX-Checksum: 1\r\n\r\n"),
    "pipelined": (1, b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                     b"GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
    "cl_te_smuggling": (4, b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"0\r\n\r\nGET /admin HTTP/1.1\r\nHost: h\r\n\r\n"),
    "oversized_chunk": (5, b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                           b"ffffffff\r\nxx\r\n0\r\n\r\n"),
    "bare_cr": (0, b"GET / HTTP/1.1\rHost: h\r\n\r\n"),
    "http10_keep_alive": (6, b"\r\nGET /health HTTP/1.0\nConnection: keep-alive\n\n"),
    "absolute_form_expect": (7, b"PUT http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com\r\n"
                                b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\nok"),
    "options_bad_version": (2, b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/2.0\r\n\r\n"),
    "gzip_chunked": (3, b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
}


def main():
    os.makedirs(FOLDER, exist_ok=True)
    for name, (split, data) in SEEDS.items():
        with open(os.path.join(FOLDER, name), "wb") as f:
            f.write(bytes([split]) + data)


if __name__ == "__main__":
    main()
