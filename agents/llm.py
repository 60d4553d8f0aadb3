"""A small client for OpenAI-compatible chat-completions servers.

OpenAI, Ollama (`/v1`), vLLM and llama.cpp's server all accept the same
`POST <base>/chat/completions` body, so one client covers them. Standard
library HTTP only: one request per chat turn does not need a client library.

Every failure becomes an LLMError whose message is safe and useful to show the
owner in the chat ("did not answer within 30 seconds", "answered with HTTP 500").
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass

from django.conf import settings

logger = logging.getLogger(__name__)

# A chat completion is a few kilobytes; refuse to buffer anything absurd.
MAX_RESPONSE_BYTES = 2_000_000


class LLMError(Exception):
    """The language model could not give a reply. `str(error)` is shown to the owner."""


class LLMTimeout(LLMError):
    pass


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    api_key: str
    model: str
    timeout: float

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def llm_config() -> LLMConfig | None:
    """The configured endpoint, or None: then the offline responder answers."""
    base_url = (settings.LLM_BASE_URL or "").strip()
    if not base_url:
        return None
    return LLMConfig(
        base_url=base_url,
        api_key=settings.LLM_API_KEY or "",
        model=settings.LLM_MODEL,
        timeout=float(settings.LLM_TIMEOUT),
    )


def _seconds(timeout: float) -> str:
    return f"{timeout:g} second{'' if timeout == 1 else 's'}"


def chat_completion(*, config: LLMConfig, messages: list[dict[str, str]]) -> str:
    """Send `messages` and return the assistant's text, or raise LLMError."""
    body = json.dumps({"model": config.model, "messages": messages, "stream": False}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(config.endpoint, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=config.timeout) as response:
            raw = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as error:
        logger.warning("LLM %s answered HTTP %s", config.endpoint, error.code)
        raise LLMError(
            f"The language model answered with an error (HTTP {error.code}). Please try again later."
        ) from error
    except TimeoutError as error:
        raise LLMTimeout(f"The language model did not answer within {_seconds(config.timeout)}.") from error
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise LLMTimeout(
                f"The language model did not answer within {_seconds(config.timeout)}."
            ) from error
        logger.warning("LLM %s unreachable: %s", config.endpoint, error.reason)
        raise LLMError(f"Could not reach the language model at {config.base_url}.") from error
    except (OSError, ValueError) as error:
        # Connection reset mid-answer, malformed URL in LLM_BASE_URL, and the like.
        logger.warning("LLM %s failed: %s", config.endpoint, error)
        raise LLMError(f"Could not reach the language model at {config.base_url}.") from error
    if len(raw) > MAX_RESPONSE_BYTES:
        raise LLMError("The language model's answer was too large to use.")
    return _reply_text(raw)


def _reply_text(raw: bytes) -> str:
    try:
        payload = json.loads(raw)
        content = payload["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise LLMError("The language model's answer could not be read.") from error
    if not isinstance(content, str) or not content.strip():
        raise LLMError("The language model gave an empty answer.")
    return content.strip()
