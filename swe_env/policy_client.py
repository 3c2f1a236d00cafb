"""A policy behind an OpenAI-compatible endpoint (vLLM, SGLang, a hosted API), over plain HTTP.

    client = PolicyClient("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-Coder-7B-Instruct")
    text, usage = client.complete([{"role": "user", "content": "hi"}])

Any failure (the endpoint down, slow, an HTTP error, a body that is not a chat completion)
raises :class:`PolicyEndpointError` naming the endpoint and what went wrong; the caller decides
what that means for a trajectory (agent mode ends it as ``endpoint_error`` and keeps it).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

MAX_BODY_BYTES = 8 << 20


class PolicyEndpointError(RuntimeError):
    """The policy endpoint did not give a usable chat completion."""


@dataclass
class PolicyClient:
    """``POST {api_base}/chat/completions``; the key from ``api_key`` or ``$POLICY_API_KEY`` if the endpoint
    needs one."""

    api_base: str
    model: str
    timeout_s: float = 120.0
    max_tokens: int = 1024
    temperature: float = 0.0
    api_key: str | None = None

    def complete(self, messages: list[dict]) -> tuple[str, dict]:
        """The assistant's text and the ``usage`` dict (empty if the endpoint sent none)."""
        url = self.api_base.rstrip("/") + "/chat/completions"
        body = json.dumps({"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                           "temperature": self.temperature}).encode()
        headers = {"Content-Type": "application/json"}
        key = self.api_key or os.environ.get("POLICY_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode("utf-8", "replace")
            raise PolicyEndpointError(f"policy endpoint {url} answered HTTP {exc.code}: {detail[:300]}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PolicyEndpointError(f"policy endpoint {url} unreachable or too slow (timeout {self.timeout_s:.0f}s): "
                                      f"{reason}. Is the server running? Check --policy-api-base.") from exc
        if len(raw) > MAX_BODY_BYTES:
            raise PolicyEndpointError(f"policy endpoint {url} sent more than {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise PolicyEndpointError(f"policy endpoint {url} sent no chat completion "
                                      f"(expected choices[0].message.content): {raw[:200]!r}") from exc
        if not isinstance(text, str):
            raise PolicyEndpointError(f"policy endpoint {url} sent a message whose content is {type(text).__name__}")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return text, usage
