from __future__ import annotations

from collections.abc import Iterator

import pytest

from mail import tasks
from mail.models import OutgoingEmail
from tests.mail.smtp import SmtpServer

PASSWORD = "correct horse battery"


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def smtp_settings(settings, smtp_server) -> SmtpServer:
    """Django's SMTP backend pointed at the test server (pytest-django sets the in-memory one)."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 10
    return smtp_server


def deliver_outbox() -> int:
    """Run the worker's send task here, once for each message waiting (what a worker does)."""
    ids = list(OutgoingEmail.objects.filter(sent_at=None, failed_at=None).values_list("pk", flat=True))
    for email_id in ids:
        tasks.send.apply(args=[email_id])
    return len(ids)


def verified(user, address: str):
    from django.utils import timezone

    from mail.models import EmailAddress

    row, _ = EmailAddress.objects.update_or_create(
        owner=user, defaults={"address": address, "verified_at": timezone.now()}
    )
    return row
