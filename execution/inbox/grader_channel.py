"""The child's end of the record channel (runs inside the container; stdlib only; never imported on the host).

    send = open_channel(key_fd, record_fd)     # before any untrusted code runs
    send("test", node="t.py::test_x", when="call", outcome="failed")

Each record is one line ``<seq> <mac> <json>`` written with one ``os.write`` to a pipe whose
reading end only the trusted parent holds.  The MAC key comes from the parent over a second
pipe, read once here and closed; it is kept only in this closure and *ratchets* after every
record (``key = sha256("ratchet" + key)``), so code that later steals the current key still
cannot forge or replace a record already sent, and a dropped record leaves a gap in ``seq``.
"""

import hashlib
import hmac
import json
import os

MAX_RECORD_BYTES = 4096


def ratchet(key: bytes) -> bytes:
    return hashlib.sha256(b"ratchet" + key).digest()


def mac(key: bytes, seq: int, body: bytes) -> str:
    return hmac.new(key, b"%d " % seq + body, hashlib.sha256).hexdigest()


def open_channel(key_fd: int, record_fd: int):
    """Read the key, close its pipe, and return ``send(kind, **fields)``."""
    key = b""
    while len(key) < 32:
        chunk = os.read(key_fd, 32 - len(key))
        if not chunk:
            raise RuntimeError("the parent closed the key pipe early")
        key += chunk
    os.close(key_fd)
    state = [key, 0]
    write, dumps = os.write, json.dumps  # bound now: later rebinding of os.write or json.dumps changes nothing here

    def send(kind: str, **fields) -> None:
        body = dumps({"k": kind, **fields}, separators=(",", ":"), default=str).encode()[:MAX_RECORD_BYTES]
        seq, current = state[1], state[0]
        line = b"%d %s %s\n" % (seq, mac(current, seq, body).encode(), body)
        state[0], state[1] = ratchet(current), seq + 1
        write(record_fd, line)

    return send
