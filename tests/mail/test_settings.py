"""E-mail settings from the environment (config/settings.py), read by a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = [
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
]
NAMES += ["EMAIL_USE_SSL", "DEFAULT_FROM_EMAIL"]
READ = (
    "import json, django; from django.conf import settings; django.setup(); "
    f"print(json.dumps({{name: getattr(settings, name) for name in {NAMES!r}}}))"
)


def settings_with(**variables: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("EMAIL_", "DEFAULT_FROM"))}
    environment |= {"DJANGO_SETTINGS_MODULE": "config.settings", **variables}
    output = subprocess.run(
        [sys.executable, "-c", READ], cwd=ROOT, env=environment, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def test_development_prints_messages_with_the_console_backend():
    assert settings_with()["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"


def test_email_url_sets_the_smtp_server_user_password_and_tls():
    found = settings_with(
        EMAIL_URL="smtp+tls://mailer:s3cret%40x@smtp.example.org:587",
        DEFAULT_FROM_EMAIL="Journal <j@example.org>",
    )
    assert found["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (found["EMAIL_HOST"], found["EMAIL_PORT"]) == ("smtp.example.org", 587)
    assert (found["EMAIL_HOST_USER"], found["EMAIL_HOST_PASSWORD"]) == ("mailer", "s3cret@x")
    assert found["EMAIL_USE_TLS"] is True and found["DEFAULT_FROM_EMAIL"] == "Journal <j@example.org>"


def test_the_parts_set_it_too_with_implicit_tls_on_port_465():
    found = settings_with(EMAIL_HOST="mail.example.org", EMAIL_PORT="465", EMAIL_HOST_USER="me")
    assert found["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (found["EMAIL_HOST"], found["EMAIL_PORT"], found["EMAIL_HOST_USER"]) == (
        "mail.example.org",
        465,
        "me",
    )
    assert found["EMAIL_USE_SSL"] is True and found["EMAIL_USE_TLS"] is False
