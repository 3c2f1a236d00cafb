"""Calling a model through LiteLLM: retries with backoff, clear errors, token and cost accounting.

Any provider LiteLLM knows works; keys come from each provider's usual environment variables.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

LOG = logging.getLogger(__name__)


class ProviderError(RuntimeError):
    """The model endpoint failed for good (unreachable, bad key, bad request, retries used up)."""


def _litellm() -> Any:
    # The bundled cost map is used unless the user opts in: fetching it from GitHub at import
    # hangs for seconds on machines that reach only a package registry.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # noqa: PLC0415 (slow import, needed only when an LLM is configured)

    litellm.suppress_debug_info = True
    return litellm


def complete(model: str, messages: list[dict], *, tools: list[dict] | None = None, api_base: str | None = None,
             api_key: str | None = None, timeout_s: float = 60, max_retries: int = 3, retry_base_s: float = 2.0,
             on_retry: Callable[[int, float, Exception], None] = lambda attempt, delay, exc: None) -> Any:
    """One chat completion; rate limits, timeouts and connection/5xx errors retried with exponential backoff.

    Raises :class:`ProviderError` with a message saying what to fix when the call cannot succeed.
    """
    litellm = _litellm()
    import openai  # noqa: PLC0415 (LiteLLM's exceptions derive from the OpenAI SDK's)

    retryable = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
                 litellm.InternalServerError, litellm.ServiceUnavailableError)
    where = f"{model} at {api_base}" if api_base else model
    for attempt in range(max_retries + 1):
        try:
            # num_retries/max_retries=0: the retries are ours, counted and logged in the transcript
            return litellm.completion(model=model, messages=messages, tools=tools, api_base=api_base,
                                      api_key=api_key, timeout=timeout_s, num_retries=0, max_retries=0)
        except retryable as exc:
            if attempt == max_retries:
                raise ProviderError(f"{where}: {type(exc).__name__} after {attempt + 1} attempt(s): "
                                    f"{short_error(exc)}; check that the endpoint is up and reachable") from exc
            delay = min(retry_base_s * 2**attempt, 60.0)
            on_retry(attempt + 1, delay, exc)
            time.sleep(delay)
        except litellm.AuthenticationError as exc:
            missing = _missing_keys(litellm, model)
            hint = f"set {', '.join(missing)}" if missing else "check the API key for this provider"
            raise ProviderError(f"{where}: authentication failed ({short_error(exc)}); {hint}") from exc
        except openai.OpenAIError as exc:
            raise ProviderError(f"{where}: {type(exc).__name__}: {short_error(exc)}") from exc
    raise AssertionError("unreachable")


def short_error(exc: Exception) -> str:
    return " ".join(str(exc).split())[:400]


def _missing_keys(litellm: Any, model: str) -> list[str]:
    try:
        return list(litellm.validate_environment(model=model).get("missing_keys") or [])
    except Exception:  # noqa: BLE001 (only a hint for an error message)
        return []


def usage_of(response: Any) -> dict:
    """Tokens from ``response.usage`` and cost from LiteLLM's accounting (0 for models it cannot price)."""
    litellm = _litellm()
    usage = getattr(response, "usage", None)
    prompt, completion = int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)
    total = int(getattr(usage, "total_tokens", 0) or 0) or prompt + completion
    try:
        cost = float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # noqa: BLE001 (an unknown local model has no price; its tokens still count)
        cost = 0.0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total, "cost_usd": cost}
