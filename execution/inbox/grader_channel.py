"""The child's end of the record channel (runs inside the container; stdlib only; never imported on the host).

    send = open_channel(key_fd, record_fd)     # before any untrusted code runs
    send("test", node="t.py::test_x", when="call", outcome="failed")

Each record is one line ``<seq> <mac> <json>`` written with one ``os.write`` to a pipe whose
reading end only the trusted parent holds.  The MAC (keyed BLAKE2b) key comes from the parent over
a second pipe, read once here and closed; it is kept only in this closure and *ratchets* after
every record, so code that later steals the current key still cannot forge or replace a record
already sent, and a dropped record leaves a gap in ``seq``.

Everything ``send`` calls is bound when the channel opens and is implemented in C (``os.write``,
``blake2b``, the JSON string encoder): rebinding ``json.dumps``, ``hmac.new`` or a function of this
module later can neither read the key nor change a record's content before it is MAC'd.
"""

import hashlib
import json.encoder
import os

MAX_RECORD_BYTES = 4096


def mac(key: bytes, seq: int, body: bytes) -> str:
    """The parent's check of one record (the child uses the same computation, bound at open time)."""
    return hashlib.blake2b(b"%d " % seq + body, key=key, digest_size=32).hexdigest()


def ratchet(key: bytes) -> bytes:
    return hashlib.blake2b(b"ratchet", key=key, digest_size=32).digest()


def open_channel(key_fd: int, record_fd: int):
    """Read the key, close its pipe, and return ``send(kind, **fields)`` (flat fields: str, int, bool, None)."""
    key = b""
    while len(key) < 32:
        chunk = os.read(key_fd, 32 - len(key))
        if not chunk:
            raise RuntimeError("the parent closed the key pipe early")
        key += chunk
    os.close(key_fd)
    state = [key, 0]
    write, blake2b, quote = os.write, hashlib.blake2b, json.encoder.c_encode_basestring_ascii
    str_, int_, bool_, type_, join = str, int, bool, type, ",".join
    if quote is None:
        raise RuntimeError("the C JSON string encoder is missing")

    def value(v) -> str:
        kind = type_(v)
        if v is None:
            return "null"
        if kind is bool_:
            return "true" if v else "false"
        if kind is int_:
            return int_.__repr__(v)
        return quote(str_.__str__(v) if kind is str_ else repr(v)[:500])

    def send(kind: str, **fields) -> None:
        items = [f"{quote('k')}:{value(kind)}"] + [f"{quote(k)}:{value(v)}" for k, v in fields.items()]
        body = ("{" + join(items) + "}").encode()[:MAX_RECORD_BYTES]
        seq, current = state[1], state[0]
        tag = blake2b(b"%d " % seq + body, key=current, digest_size=32).hexdigest()
        state[0], state[1] = blake2b(b"ratchet", key=current, digest_size=32).digest(), seq + 1
        write(record_fd, b"%d %s %s\n" % (seq, tag.encode(), body))

    return send
