#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-http2-response: what an APNs server sends after the handshake.

The fuzzer opens streams 1, 3 and 5 before it feeds a seed, so the seeds answer those. Header
blocks use HPACK's static table and literals (with and without indexing, one Huffman-coded
value), as nghttp2 and Apple's servers do. Run from the repository root; the files are committed.
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "http2-response")

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def integer(value, prefix_bits, first_byte_flags):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = bytearray([first_byte_flags | limit])
    value -= limit
    while value >= 128:
        out.append((value % 128) + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def string(text):
    data = text.encode()
    return integer(len(data), 7, 0) + data


def indexed(index):
    return integer(index, 7, 0x80)


def literal_indexed_name(index, value, incremental=True):
    return (integer(index, 6, 0x40) if incremental else integer(index, 4, 0x00)) + string(value)


def literal_new_name(name, value, incremental=False):
    return bytes([0x40 if incremental else 0x00]) + string(name) + string(value)


STATUS_200, STATUS_400 = indexed(8), indexed(12)
CONTENT_TYPE = 31


def status(code):
    return {200: STATUS_200, 400: STATUS_400}.get(code) or literal_indexed_name(8, str(code), incremental=False)


def apns_id(n):
    return literal_new_name("apns-id", "0E9C3B44-1B8A-4E5B-9C0D-7A1B2C3D4E5%d" % n)


def answer(stream, code, body=None, n=0):
    block = status(code) + apns_id(n)
    if body is None:
        return frame(HEADERS, END_HEADERS | END_STREAM, stream, block)
    block += literal_indexed_name(CONTENT_TYPE, "application/json")
    return frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM, stream, body.encode())


def goaway(last_stream, code, debug=b""):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_stream, code) + debug)


def settings(*pairs, ack=False):
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


SEEDS = {
    "200-each-stream": answer(1, 200, n=1) + answer(3, 200, n=3) + answer(5, 200, n=5),
    "400-bad-device-token": answer(1, 400, '{"reason":"BadDeviceToken"}'),
    "410-unregistered-timestamp": answer(3, 410, '{"reason":"Unregistered","timestamp":1700000000000}'),
    "403-expired-provider-token": answer(5, 403, '{"reason":"ExpiredProviderToken"}'),
    "429-too-many-requests": answer(1, 429, '{"reason":"TooManyRequests"}') + answer(3, 200),
    "500-503-mixed": answer(1, 500, '{"reason":"InternalServerError"}') + answer(3, 503, '{"reason":"ServiceUnavailable"}')
    + answer(5, 200),
    "unknown-reason-non-json-body": answer(1, 400, '{"reason":"SomethingNew"}') + answer(3, 400, "<html>nope</html>"),
    "200-with-body": answer(1, 200, '{"unexpected":true}'),
    "body-in-many-data-frames": frame(HEADERS, END_HEADERS, 1, status(400) + literal_indexed_name(CONTENT_TYPE, "application/json"))
    + frame(DATA, 0, 1, b'{"reas') + frame(DATA, 0, 1, b'on":"Payload') + frame(DATA, END_STREAM, 1, b'TooLarge"}'),
    "headers-continuation": frame(HEADERS, 0, 1, status(200)) + frame(CONTINUATION, END_HEADERS | END_STREAM, 1, apns_id(1)),
    "trailers": frame(HEADERS, END_HEADERS, 3, status(400)) + frame(DATA, 0, 3, b'{"reason":"BadTopic"}')
    + frame(HEADERS, END_HEADERS | END_STREAM, 3, literal_new_name("x-trailer", "1")),
    "goaway-no-error-last-1": goaway(1, 0) + answer(1, 200),
    "goaway-error-debug-data": goaway(0, 2, b"server shutting down"),
    "goaway-then-close": answer(1, 200) + goaway(5, 0) + answer(3, 200) + answer(5, 200),
    "rst-refused-and-internal": frame(RST_STREAM, 0, 1, struct.pack(">I", 7)) + frame(RST_STREAM, 0, 3, struct.pack(">I", 2))
    + answer(5, 200),
    "settings-lower-streams-then-answers": settings((3, 1), (4, 65535)) + answer(1, 200) + settings((3, 1000)),
    "ping-and-window-update": frame(PING, 0, 0, b"12345678") + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 20))
    + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1024)) + answer(1, 200),
    "dynamic-table-reuse": frame(HEADERS, END_HEADERS | END_STREAM, 1, status(200) + literal_new_name("apns-id", "A", True))
    + frame(HEADERS, END_HEADERS | END_STREAM, 3, status(200) + indexed(62)),
    "huffman-status": frame(HEADERS, END_HEADERS | END_STREAM, 1, bytes([0x08, 0x82, 0x64, 0x00])),  # :status "200" in Huffman
    "padded-data": frame(HEADERS, END_HEADERS, 1, status(400)) + frame(DATA, END_STREAM | 0x8, 1, b"\x04" + b'{"reason":"BadPath"}' + b"\0" * 4),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as file:
            file.write(data)


if __name__ == "__main__":
    main()
