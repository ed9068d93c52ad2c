#!/usr/bin/env python3
"""Writes the handwritten seed corpus of ferry's fuzz targets into fuzz/corpus/<target>/.

    python3 fuzz/make_corpus.py

Each seed is the target's input layout (see fuzz/README.md) around a valid or nearly valid
value: frames, gzip streams, header values. Regression inputs the fuzzers found live beside the
seeds as crash-<hash> files and are never rewritten here. Standard library only; deterministic.
"""

import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def frame(payload, flag=0):
    return bytes([flag]) + struct.pack(">I", len(payload)) + payload


def gz(data):
    return gzip.compress(data, compresslevel=6, mtime=0)


# --- frame_decoder_fuzzer: mode byte (limit index | 8 compression | bits 4-5 push style),
# 8 chunk sizes (n + 1 bytes each, 255 = the rest), then the stream.
FD = "frame_decoder_fuzzer"
ONE_BYTE_CHUNKS = bytes([0] * 8)
WHOLE = bytes([255] * 8)
MIXED = bytes([0, 3, 4, 5, 0, 16, 255, 1])
hello = bytes.fromhex("0a0568656c6c6f")  # protobuf: field 1 = "hello"
write(FD, "empty_message", bytes([7]) + WHOLE + frame(b""))
write(FD, "one_message_split", bytes([7]) + ONE_BYTE_CHUNKS + frame(hello))
write(FD, "three_messages", bytes([7 | 0x20]) + MIXED + frame(hello) + frame(b"") + frame(b"x" * 300))
write(FD, "compressed_negotiated", bytes([7 | 8]) + MIXED + frame(gz(hello * 20), 1) + frame(hello))
write(FD, "compressed_not_negotiated", bytes([7]) + WHOLE + frame(gz(hello), 1))
write(FD, "bad_flag", bytes([7]) + MIXED + frame(hello) + frame(hello, 2))
write(FD, "over_limit", bytes([4]) + MIXED + frame(b"y" * 101))
write(FD, "at_limit", bytes([4 | 0x10]) + MIXED + frame(b"y" * 100) + frame(b"y" * 100))
write(FD, "truncated", bytes([7]) + ONE_BYTE_CHUNKS + frame(hello)[:-2])
write(FD, "huge_length", bytes([7]) + WHOLE + b"\x00\xff\xff\xff\xff")

# --- gzip_fuzzer: limit selector, limit low byte, chunk size (0 = one slice), bytes already in
# out (>= 240: also the compress round trip), then the compressed bytes.
GZ = "gzip_fuzzer"
text = b"the quick brown fox jumps over the lazy dog " * 20
write(GZ, "text", bytes([12, 0, 0, 0]) + gz(text))
write(GZ, "text_split", bytes([12, 0, 7, 3]) + gz(text))
write(GZ, "two_members", bytes([12, 0, 13, 0]) + gz(b"first") + gz(b"second"))
write(GZ, "empty_member", bytes([12, 0, 0, 0]) + gz(b""))
write(GZ, "zeros_over_limit", bytes([11, 0, 64, 0]) + gz(bytes(2 << 20)))  # 2 MiB vs 1 MiB
write(GZ, "exactly_limit", bytes([4, 0, 0, 0]) + gz(bytes(1000)))
write(GZ, "one_past_limit", bytes([4, 0, 1, 0]) + gz(bytes(1001)))
write(GZ, "truncated", bytes([12, 0, 0, 0]) + gz(text)[:-5])
write(GZ, "bad_crc", bytes([12, 0, 0, 0]) + gz(text)[:-8] + b"\0\0\0\0" + gz(text)[-4:])
write(GZ, "trailing_garbage", bytes([12, 0, 0, 0]) + gz(b"abc") + b"\x00\x01")
write(GZ, "round_trip", bytes([12, 0, 5, 250]) + text)

# --- wire_format_fuzzer: selector (0 timeout, 1 timeout format, 2 grpc-message, 3 -bin,
# 4 content-type, 5 grpc-status, 6 encodings, 7 all), then the value.
WF = "wire_format_fuzzer"
for i, v in enumerate([b"1H", b"99999999H", b"2562048H", b"0n", b"100m", b"12345678u", b"1",
                       b"123456789S", b"-1S", b"1 S", b"abc"]):
    write(WF, "timeout_%d" % i, b"\x00" + v)
write(WF, "timeout_format_max", b"\x01" + struct.pack("<q", 2**63 - 1))
write(WF, "timeout_format_negative", b"\x01" + struct.pack("<q", -5))
write(WF, "message_special", b"\x02" + "\t\ntest with whitespace\r\nand Unicode BMP \u263a and "
      "non-BMP \U0001f608\t\n".encode())
write(WF, "message_escapes", b"\x02%41%zz%4%")
write(WF, "bin_padded", b"\x03AAECAw==")
write(WF, "bin_commas", b"\x03AAEC, AwQ,")
write(WF, "content_type", b"\x04application/grpc+proto")
write(WF, "content_type_params", b"\x04application/grpc;charset=utf-8")
write(WF, "status", b"\x0516")
write(WF, "status_big", b"\x0599999999999999999999")
write(WF, "accept", b"\x06identity, deflate,gzip")
write(WF, "all", b"\x07gzip")

# --- server_connection_fuzzer: chunk byte (n + 1 bytes per delivery), then what a client sends
# after the preface: frames. Header blocks are HPACK literals with new names (no table state).
SC = "server_connection_fuzzer"


def h2(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack(fields):
    out = b""
    for name, value in fields:
        out += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    return out


REQUEST = hpack([(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/pkg.Svc/Method"),
                 (b":authority", b"fuzz"), (b"content-type", b"application/grpc"),
                 (b"grpc-timeout", b"1S")])
SETTINGS = h2(4, 0, 0, struct.pack(">HI", 4, 65535)) + h2(4, 1, 0)
MESSAGE = frame(hello)


def unary(stream, end_headers=True):
    return h2(1, 4 if end_headers else 0, stream, REQUEST) + h2(0, 1, stream, MESSAGE)


write(SC, "unary", b"\xff" + SETTINGS + unary(1))
write(SC, "unary_bytewise", b"\x00" + SETTINGS + unary(1))
write(SC, "many_calls", b"\x3f" + SETTINGS + b"".join(unary(i) for i in range(1, 80, 2)))
write(SC, "reset_then_frames", b"\xff" + SETTINGS + h2(1, 4, 1, REQUEST) + h2(3, 0, 1, struct.pack(">I", 8))
      + h2(0, 1, 1, MESSAGE) + h2(1, 5, 1, hpack([(b"x-trailer", b"1")])))
write(SC, "closed_then_headers", b"\xff" + SETTINGS + unary(1) + h2(1, 5, 1, REQUEST))
write(SC, "lower_id", b"\xff" + SETTINGS + unary(5) + unary(3))
write(SC, "refused_and_rejected", b"\xff" + SETTINGS + unary(7)
      + h2(1, 5, 9, REQUEST + hpack([(b"x-reject", b"1")])))
write(SC, "continuation", b"\xff" + SETTINGS + h2(1, 0, 1, REQUEST[:20]) + h2(9, 4, 1, REQUEST[20:])
      + h2(0, 1, 1, MESSAGE))
write(SC, "ping_window_goaway", b"\x10" + SETTINGS + h2(6, 0, 0, b"12345678") + unary(1)
      + h2(8, 0, 0, struct.pack(">I", 1 << 20)) + h2(8, 0, 1, struct.pack(">I", 100))
      + h2(7, 0, 0, struct.pack(">II", 1, 0)))
write(SC, "big_body", b"\xff" + SETTINGS + h2(1, 4, 1, REQUEST)
      + b"".join(h2(0, 0, 1, b"\x00" * 16384) for _ in range(5)) + h2(0, 1, 1, b""))

# --- h2_session_server_fuzzer: chunk byte, then the calls per part of a read (mod 8, 0 = the
# whole read), then what a client sends after the preface. The server_connection_fuzzer seeds with
# a parts byte each, a request answered before it ends (stream 11 answers early: id % 5 == 1),
# DATA on it after the answer, a stream that never reads (3: id % 5 == 3) filled to its window,
# and each h2spec recording of h2_frame_server_fuzzer without its two bytes and the preface.
HS = "h2_session_server_fuzzer"
sc_dir = os.path.join(HERE, "corpus", SC)
for name in sorted(os.listdir(sc_dir)):
    if name.startswith("crash-"):
        continue
    with open(os.path.join(sc_dir, name), "rb") as f:
        seed = f.read()
    write(HS, name, seed[:1] + b"\x02" + seed[1:])
write(HS, "answered_early_then_data", b"\xff\x00" + SETTINGS + h2(1, 4, 11, REQUEST)
      + h2(0, 0, 11, MESSAGE) + h2(8, 0, 11, struct.pack(">I", 0)) + h2(0, 1, 11, MESSAGE))
write(HS, "unread_window_full", b"\x40\x00" + SETTINGS + h2(1, 4, 3, REQUEST)
      + b"".join(h2(0, 0, 3, b"\x00" * 16384) for _ in range(4)) + h2(0, 1, 3, b"\x00" * 16384))
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
hf_dir = os.path.join(HERE, "corpus", "h2_frame_server_fuzzer")
for name in sorted(os.listdir(hf_dir)):
    if not name.startswith("h2spec_"):
        continue
    with open(os.path.join(hf_dir, name), "rb") as f:
        seed = f.read()
    if seed[:2] == b"\x00\x00" and seed[2:2 + len(PREFACE)] == PREFACE:
        write(HS, name, b"\xff\x00" + seed[2 + len(PREFACE):])

# http1_connection_fuzzer: first byte chooses the chunking, then an HTTP/1.1 client's bytes.
H1 = "http1_connection_fuzzer"
POST = (b"POST /helloworld.Greeter/SayHello HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
        b"content-length: 16\r\n\r\n{\"name\": \"fuzz\"}")
write(H1, "post", b"\xff" + POST)
write(H1, "post_bytewise", b"\x00" + POST)
write(H1, "pipelined_keepalive", b"\x40" + POST * 3)
write(H1, "chunked_body", b"\xff" + b"POST /a/b HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n"
      b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n")
write(H1, "expect_continue", b"\xff" + b"POST /a/b HTTP/1.1\r\nhost: t\r\nexpect: 100-continue\r\n"
      b"content-length: 3\r\n\r\nabc")
write(H1, "rejected_header", b"\xff" + b"POST /a/b HTTP/1.1\r\nx-reject: 1\r\ncontent-length: 0\r\n\r\n"
      + POST)
write(H1, "get_and_close", b"\xff" + b"GET /a/b?encoding=json&message=%7B%7D HTTP/1.1\r\nhost: t\r\n"
      b"connection: close\r\n\r\n" + POST)
write(H1, "http10_and_options", b"\xff" + b"OPTIONS /a/b HTTP/1.0\r\norigin: http://x\r\n\r\n")

# http1_client_fuzzer: the chunking byte, a byte choosing the calls (count 1..4 in the low two
# bits, each call's behaviour in two bits above), then an HTTP/1.1 server's responses.
HC = "http1_client_fuzzer"
RESP = (b"HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ntrailer-t: v\r\n"
        b"content-length: 5\r\n\r\nhello")
CHUNKED = (b"HTTP/1.1 200 OK\r\ncontent-type: application/connect+proto\r\n"
           b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-t: 1\r\n\r\n")
write(HC, "one_response", b"\xff\x00" + RESP)
write(HC, "bytewise", b"\x00\x00" + RESP)
write(HC, "keepalive_three_calls", b"\x40\x06" + RESP + CHUNKED + RESP)
write(HC, "continue_then_response", b"\xff\x00" + b"HTTP/1.1 100 Continue\r\n\r\n" + RESP)
write(HC, "close_delimited", b"\xff\x01" + b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nbody")
write(HC, "rejected_header", b"\xff\x01" + b"HTTP/1.1 404 Not Found\r\nx-reject: 1\r\n"
      b"content-length: 0\r\n\r\n" + RESP)
write(HC, "cancelled_then_next", b"\xff\x09" + CHUNKED + RESP)

# authz_policy_fuzzer: the policy text itself. The agreement test's policies and malformed
# policies (test/authz_agreement), and a policy with every field and an audit logger's config.
AZ = "authz_policy_fuzzer"
AGREEMENT = os.path.join(HERE, "..", "test", "authz_agreement")
for sub in ("policies", "malformed"):
    for name in sorted(os.listdir(os.path.join(AGREEMENT, sub))):
        with open(os.path.join(AGREEMENT, sub, name), "rb") as f:
            write(AZ, sub + "_" + name[:-len(".json")], f.read())
write(AZ, "every_field", b'{"name":"p","deny_rules":[{"name":"d","source":{"principals":["*"]},'
      b'"request":{"paths":["/a.B/*","*/C"],"headers":[{"key":"x-k","values":["v*","*v","*"]}]}}],'
      b'"allow_rules":[{"name":"a","request":{"paths":["/a.B/C"]}}],"audit_logging_options":'
      b'{"audit_condition":"ON_DENY_AND_ALLOW","audit_loggers":[{"name":"stdout_logger",'
      b'"config":{"a":[1,{"b":null}]},"is_optional":false}]}}')

# service_config_fuzzer: the service config text itself, the shapes test/service_config_test.cc
# reads (every field, zero and sub-millisecond timeouts, throttling at its bounds) and ones it
# refuses (a duplicate name, a ratio under a thousandth, a number out of range).
SC = "service_config_fuzzer"
write(SC, "every_field", b'{"loadBalancingConfig":[{"grpclb":{}},{"round_robin":{}}],'
      b'"methodConfig":[{"name":[{"service":"pkg.Echo","method":"Call"},{"service":"pkg.Other"}],'
      b'"timeout":"1.5s","waitForReady":true,"maxRequestMessageBytes":1048576,'
      b'"maxResponseMessageBytes":"4194304","retryPolicy":{"maxAttempts":4,'
      b'"initialBackoff":"0.25s","maxBackoff":"2s","backoffMultiplier":1.5,'
      b'"retryableStatusCodes":["UNAVAILABLE",4]}},{"name":[{}],"timeout":"0s"}],'
      b'"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}}')
write(SC, "policy_name", b'{"loadBalancingPolicy":"round_robin","methodConfig":[{"name":'
      b'[{"service":"a.S"}],"timeout":"0.0005s","waitForReady":false}]}')
write(SC, "throttling_bounds", b'{"retryThrottling":{"maxTokens":1000,"tokenRatio":1.001}}')
write(SC, "duplicate_name", b'{"methodConfig":[{"name":[{"service":"a.S","method":"M"}]},'
      b'{"name":[{"service":"a.S","method":"M"}]}]}')
write(SC, "tiny_ratio", b'{"retryThrottling":{"maxTokens":10,"tokenRatio":0.0001}}')
write(SC, "huge_number", b'{"methodConfig":[{"name":[{}],"maxRequestMessageBytes":1e400}]}')

# xds_bootstrap_fuzzer: the bootstrap text itself. grpc-go's and gRPC C++'s shape with every
# field, the minimal one, and near misses (no servers, unknown creds, wrong types).
XB = "xds_bootstrap_fuzzer"
write(XB, "every_field", b'{"xds_servers":[{"server_uri":"dns:///xds.example.com:443",'
      b'"channel_creds":[{"type":"google_default"},{"type":"tls","config":{"ca_certificate_file":'
      b'"/ca.pem"}}],"server_features":["xds_v3","ignore_resource_deletion"]},{"server_uri":'
      b'"localhost:18000","channel_creds":[{"type":"insecure"}]}],"node":{"id":"n","cluster":"c",'
      b'"locality":{"region":"r","zone":"z","sub_zone":"s"},"metadata":{"k":[1.5,true,null,"\\u00e9"]}},'
      b'"certificate_providers":{"d":{"plugin_name":"file_watcher"}},"authorities":{}}')
write(XB, "minimal", b'{"xds_servers":[{"server_uri":"a:1","channel_creds":[{"type":"insecure"}]}]}')
write(XB, "no_servers", b'{"xds_servers":[],"node":{"id":"n"}}')
write(XB, "unknown_creds", b'{"xds_servers":[{"server_uri":"a:1","channel_creds":[{"type":"alts"}]}]}')
write(XB, "wrong_types", b'{"xds_servers":[{"server_uri":1,"channel_creds":{}}],"node":[]}')

# hpack_decoder_fuzzer and hpack_differential_fuzzer: byte 0 the limits (decoder fuzzer only:
# bits 0-1 SETTINGS_HEADER_TABLE_SIZE 0/256/4096/65536, bits 2-3 the list size 64/1000/16384/
# 1 MiB, bits 4-5 the field count 1/10/100/100000), then records of 3 bytes, kind and a 16-bit
# value: kind % 4 == 3 sets SETTINGS_HEADER_TABLE_SIZE to the value, else a header block of that
# many bytes follows. RFC 7541 Appendix C's sequences, ferry's encoder's gRPC blocks (first and
# repeated calls, never-indexed authorization), an HPACK bomb, size updates.
HPACK_TARGETS = ("hpack_decoder_fuzzer", "hpack_differential_fuzzer")
LIMITS = 0x2a  # 4096, 16384, 100: ferry's defaults


def blocks(*hex_blocks):
    out = b""
    for h in hex_blocks:
        b = bytes.fromhex(h)
        out += bytes([0]) + struct.pack(">H", len(b)) + b
    return out


def table_size(n):
    return bytes([3]) + struct.pack(">H", n)


C3 = blocks("828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
            "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")
C4 = blocks("828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
            "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")
# C.5 and C.6 with SETTINGS_HEADER_TABLE_SIZE 256, acknowledged by a size update (3fe101).
C5 = table_size(256) + blocks(
    "3fe1014803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a3231"
    "20474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
    "4803333037c1c0bf",
    "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f"
    "6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b"
    "2076657273696f6e3d31")
C6 = table_size(256) + blocks(
    "3fe1014882640258" "85aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad"
    "171863c78f0b97c8e9ae82ae43d3",
    "4883640effc1c0bf",
    "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335"
    "dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007")
GRPC_CLIENT = blocks(
    "8386449a626b2b22e92a126aa65f79509dc5b3b9885638543b3d5e1d147f418ba0e41d139d09b8d800d87f40"
    "82497f864d833505b11f5f8b1d75d0620d263d4c4d65647a8c9acac8b13fdffb602bbcdae0408e9acac8b0c8"
    "42d6958b510f21aa9b903485a9264fafa90b2d03497ea6f66aff00899acac8b24d494f6a7f820eef1f0886ba"
    "51d85b144f",
    "8386c3c2c1c0bfbe00899acac8b24d494f6a7f820eef1f0886ba51d85b144f")
GRPC_SERVER = blocks("885f8b1d75d0620d263d4c4d6564408a9acac8b16a21e435537f839bd9ab",
                     "40889acac8b21234da8f810700899acac8b5254207317f863f55440a8fe3",
                     "88c0bf", "be00899acac8b5254207317f863f55440a8fe3")
bomb_block = b"\x40\x01x\x7f\xe9\x06" + b"a" * 1000 + b"\xbe" * 2000  # x: 1000 a's, 2000 refs
for t in HPACK_TARGETS:
    write(t, "rfc7541_c3", bytes([LIMITS]) + C3)
    write(t, "rfc7541_c4", bytes([LIMITS]) + C4)
    write(t, "rfc7541_c5", bytes([LIMITS]) + C5)
    write(t, "rfc7541_c6", bytes([LIMITS]) + C6)
    write(t, "grpc_client", bytes([LIMITS]) + GRPC_CLIENT)
    write(t, "grpc_server", bytes([LIMITS]) + GRPC_SERVER)
    write(t, "bomb", bytes([LIMITS]) + bytes([0]) + struct.pack(">H", len(bomb_block)) + bomb_block
          + blocks("be"))
    write(t, "size_updates", bytes([LIMITS]) + blocks("3fe11f2082", "82") + table_size(100)
          + table_size(4096) + blocks("3f4582", "3fe11f82") + table_size(0) + blocks("2082"))
    write(t, "never_indexed_and_without", bytes([LIMITS]) + blocks(
        "100870617373776f726406736563726574", "040c2f73616d706c652f70617468", "1f0801782082"))

# --- h2_frame_server_fuzzer and h2_frame_client_fuzzer: byte 0 the limits (bits 0-1 max frame
# size, 2-3 header block size, 4-5 CONTINUATION cap; 0 = ferry's defaults) and 0x40 to put the
# preface (server side) and an empty SETTINGS first; byte 1 the chunking's seed; then the bytes.
def h2(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) \
        + payload


WITH_START = 0x40
h2_ping = h2(6, 0, 0, b"12345678")
h2_unary = h2(1, 4, 1, bytes.fromhex(GRPC_CLIENT.hex()[6:])) + h2(0, 1, 1, b"\0\0\0\0\x07" + hello)
h2_split = h2(1, 0x28, 3, b"\x02" + struct.pack(">I", 1) + b"\x10" + b"ab" + b"\0\0") \
    + h2(9, 0, 3, b"cd") + h2(9, 0, 3) + h2(9, 5, 3, b"ef")
h2_settings = h2(4, 0, 0, struct.pack(">HI", 1, 8192) + struct.pack(">HI", 4, 65535)
                 + struct.pack(">HI", 5, 16384) + struct.pack(">HI", 0x77, 1)) + h2(4, 1, 0)
h2_misc = h2(8, 0, 0, struct.pack(">I", 1 << 20)) + h2(3, 0, 1, struct.pack(">I", 8)) \
    + h2(2, 0, 5, struct.pack(">I", 1) + b"\x10") + h2(0xfa, 0xff, 0, b"unknown") \
    + h2(7, 0, 0, struct.pack(">II", 1, 0) + b"debug") + h2(0, 8, 1, b"\x03abc\0\0\0")
for side in ("server", "client"):
    t = "h2_frame_%s_fuzzer" % side
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" if side == "server" else b""
    write(t, "ping", bytes([WITH_START, 0]) + h2_ping)
    write(t, "unary", bytes([WITH_START, 1]) + h2_unary)
    write(t, "split_block", bytes([WITH_START | 0x20, 2]) + h2_split)
    write(t, "settings_first", bytes([0, 3]) + preface + h2_settings + h2_misc)
    write(t, "every_frame", bytes([WITH_START | 0x5, 4]) + h2_settings + h2_misc + h2_unary
          + h2_split + h2_ping)
    write(t, "continuation_flood", bytes([WITH_START, 5]) + h2(1, 0, 1)
          + b"".join(h2(9, 0, 1) for _ in range(10)))
    write(t, "huge_length", bytes([WITH_START, 6]) + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01")

# --- trace_context_fuzzer: selector (0 traceparent, 1 tracestate, 2 grpc-trace-bin, 3 base64,
# 4 metadata "key:value" lines), then the value. The W3C cases follow its test suite's.
TC = "trace_context_fuzzer"
TP = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
write(TC, "traceparent", b"\x00" + TP)
write(TC, "traceparent_future", b"\x00cc" + TP[2:] + b"-what-the-future-will-be")
write(TC, "traceparent_upper", b"\x00" + TP.upper())
write(TC, "traceparent_zero_trace", b"\x00" + TP[:3] + b"0" * 32 + TP[35:])
write(TC, "traceparent_ff", b"\x00ff" + TP[2:])
write(TC, "traceparent_ows", b"\x00 \t" + TP + b"\t ")
write(TC, "tracestate", b"\x01rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
write(TC, "tracestate_tenant", b"\x01 t@vendor=1, ,0x@y=v w")
write(TC, "tracestate_dup", b"\x01a=1,a=2")
BIN = bytes([0, 0]) + bytes(range(1, 17)) + bytes([1]) + bytes(range(0xa0, 0xa8)) + bytes([2, 1])
write(TC, "trace_bin", b"\x02" + BIN)
write(TC, "trace_bin_no_options", b"\x02" + BIN[:27])
write(TC, "trace_bin_extra_field", b"\x02" + BIN + b"\x03\x01\x02")
write(TC, "trace_bin_truncated", b"\x02" + BIN[:20])
write(TC, "base64", b"\x03AAABAgMEBQYHCAkKCwwNDg8QAaChoqOkpaanAgE")
write(TC, "base64_padded", b"\x03AAE=")
write(TC, "metadata_both", b"\x04traceparent:" + TP + b"\ntracestate:a=1\ntracestate:b=2\n"
      b"grpc-trace-bin:" + BIN)
write(TC, "metadata_two_parents", b"\x04traceparent:" + TP + b"\ntraceparent:" + TP)
