"""Host side of the record stream: strict, bounded parsing of what the trusted parent printed.

    parser = RecordParser()
    for chunk in stream: parser.feed(chunk)        # or parser.feed(all_stdout) after the run
    parser.close()
    parser.records, parser.problems

Every line must be one JSON object with a string ``k`` (its kind) and at most ``MAX_FIELDS``
scalar or short-list fields; anything else, an over-long line, or more than ``max_records``
lines becomes a *problem* (a string), never an exception.  The parent is trusted, so a problem
here means the parent's output was cut (the container was killed mid-line) or something is broken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_LINE_BYTES = 16384
MAX_FIELDS = 16
MAX_STRING = 2000


@dataclass
class RecordParser:
    """Feed bytes as they arrive; complete lines become ``records`` (dicts) or ``problems``."""

    max_records: int = 20000
    records: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _buffer: bytes = b""

    def feed(self, data: bytes) -> list[dict]:
        """Parse the complete lines in ``data``; return the records they held."""
        self._buffer += data
        new: list[dict] = []
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            record = self._parse(line)
            if record is not None:
                new.append(record)
        if len(self._buffer) > MAX_LINE_BYTES:
            self._problem(f"a line longer than {MAX_LINE_BYTES} bytes")
            self._buffer = b""
        return new

    def close(self) -> None:
        """The stream ended: a partial last line is a problem (the writer was cut off mid-line)."""
        if self._buffer.strip():
            self._problem(f"the stream ended inside a line ({len(self._buffer)} bytes)")
        self._buffer = b""

    def _parse(self, line: bytes) -> dict | None:
        if not line.strip():
            return None
        if len(line) > MAX_LINE_BYTES:
            self._problem(f"a line longer than {MAX_LINE_BYTES} bytes")
            return None
        try:
            record = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            self._problem(f"a line that is not JSON: {str(exc)[:100]}")
            return None
        if not isinstance(record, dict) or not isinstance(record.get("k"), str) or len(record) > MAX_FIELDS:
            self._problem("a line that is not an object with a string 'k' and few fields")
            return None
        for key, value in record.items():
            if not _scalar(value) and not (isinstance(value, list) and len(value) <= 50 and all(map(_scalar, value))):
                self._problem(f"record field {key!r} is not a scalar or a short list of scalars")
                return None
        if len(self.records) >= self.max_records:
            self._problem(f"more than {self.max_records} records")
            return None
        self.records.append(record)
        return record

    def _problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text)


def _scalar(value: object) -> bool:
    return (value is None or isinstance(value, (bool, int, float))
            or (isinstance(value, str) and len(value) <= MAX_STRING))


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")
