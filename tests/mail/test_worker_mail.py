"""A real Celery worker sends the mail, against the real SMTP server the test starts.

The worker gets the server's address in EMAIL_URL and a one-second backoff; a request
(the test client) writes the invitation and its message and returns; the worker sends it
after commit. The server answers 451 to the first tries: the worker retries until it
takes the message, and the request's work (the invitation) was never at risk.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from circles.models import JoinRequest
from circles.services import circle_create
from mail.models import OutgoingEmail
from tests.mail.smtp import SmtpServer
from tests.memories.test_worker import Worker, wait_until, worker_broker, worker_environment  # noqa: F401

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def mail_worker(worker_broker, smtp_server: SmtpServer) -> Iterator[Worker]:  # noqa: F811
    environment = worker_environment(worker_broker) | {
        "EMAIL_URL": smtp_server.url,
        "MAIL_RETRY_BACKOFF": "1",
        "MAIL_RETRY_BACKOFF_MAX": "2",
        "MAIL_DIGEST_HOUR": "0",
        "KEEPSAKE_BASE_URL": "http://journal.test",
    }
    with tempfile.TemporaryDirectory() as directory:
        log_path = Path(directory) / "worker.log"
        process = Worker(environment, log_path)
        process.start()
        try:
            yield process
        finally:
            process.stop()
            print(log_path.read_text()[-5000:])


def test_the_worker_sends_an_invitation_after_refusals_and_its_link_works(alice, mail_worker, smtp_server):
    from accounts.services import user_signup

    bob = user_signup(username="bob", password="correct horse battery")
    family = circle_create(owner=alice, name="Family", description="")
    smtp_server.refuse_next(2)

    alice_client = Client()
    alice_client.force_login(alice)
    response = alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "bob@example.org"})
    assert response.status_code == 302 and family.invites.count() == 1  # the work is done, mail or not

    wait_until(lambda: smtp_server.to("bob@example.org"), what="the invitation to arrive")
    # The server has the message before the worker records it as sent (its next statement).
    wait_until(lambda: not OutgoingEmail.objects.filter(sent_at=None).exists(), what="the outbox to empty")
    email = OutgoingEmail.objects.get()
    assert email.sent_at is not None and email.attempts == 3 and "451" in email.last_error
    assert smtp_server.attempts == 3
    (received,) = smtp_server.to("bob@example.org")
    assert "alice" in received.subject and "Family" in received.subject
    (link,) = [link for link in received.links() if "/circles/invites/" in link]

    bob_client = Client()
    bob_client.force_login(bob)
    bob_client.post(urlsplit(link).path + "ask/")
    assert JoinRequest.objects.filter(circle=family, user=bob).exists()


def test_the_worker_sends_a_password_reset_whose_link_sets_the_password(alice, mail_worker, smtp_server):
    from tests.mail.conftest import verified

    verified(alice, "alice@example.org")
    visitor = Client()
    visitor.post(reverse("mail_password_reset"), {"address": "alice@example.org"})
    wait_until(lambda: smtp_server.to("alice@example.org"), what="the reset link to arrive")
    (received,) = smtp_server.to("alice@example.org")
    (link,) = [link for link in received.links() if "/password-reset/" in link]
    form = visitor.get(urlsplit(link).path, follow=True)
    visitor.post(
        form.redirect_chain[-1][0],
        {"new_password1": "sea shells 2026 x", "new_password2": "sea shells 2026 x"},
    )
    alice.refresh_from_db()
    assert alice.check_password("sea shells 2026 x")


def test_the_beats_digest_run_reaches_the_owner_once_through_the_worker(alice, mail_worker, smtp_server):
    from django.utils import timezone

    from mail import tasks
    from mail.models import EmailAddress
    from memories.services import memory_create
    from memories.tasks import enqueue
    from tests.mail.conftest import verified

    verified(alice, "alice@example.org")
    EmailAddress.objects.filter(owner=alice).update(daily_digest=True)
    memory_create(
        owner=alice,
        body="First swim of the year at the cove",
        occurred_at=timezone.localtime().replace(year=timezone.localdate().year - 2),
    )
    # What the beat publishes every 15 minutes, published the way the product publishes (enqueue:
    # this thread's own broker connection, opened for the current broker; Celery's shared
    # producer pool may still hold a connection an earlier test's broker left behind).
    assert enqueue(tasks.digests)
    assert enqueue(tasks.digests)  # twice: still one digest today
    wait_until(lambda: smtp_server.to("alice@example.org"), what="the digest to arrive")
    wait_until(lambda: not OutgoingEmail.objects.filter(sent_at=None).exists(), what="the outbox to empty")
    (received,) = smtp_server.to("alice@example.org")
    assert "First swim of the year" in received.text and "2 years ago" in received.text
    assert "http://journal.test/on-this-day/" in received.text  # the worker's links: KEEPSAKE_BASE_URL
