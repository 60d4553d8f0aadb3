"""The worker's side of e-mail: send one queued message, catch up lost publishes, make digests.

`send` claims its message with a conditional update (a redelivered or duplicated task
sends nothing twice), talks to the SMTP server, and on a refusal or a connection
failure releases the claim and retries with exponential backoff; after the last retry
the message is marked failed (kept, with the error, for the operator).
"""

from __future__ import annotations

import logging
import smtplib
from datetime import date, timedelta

from celery import shared_task
from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import F, Q
from django.utils import timezone

from mail import services
from mail.models import OutgoingEmail

logger = logging.getLogger(__name__)

# What a mail server or the network answers when it is worth asking again later:
# 4xx replies, refused or dropped connections, timeouts (smtplib's errors are OSErrors too).
TRANSIENT_SMTP_ERRORS = (smtplib.SMTPException, OSError)
CLAIM = timedelta(minutes=5)  # longer than one attempt may take (EMAIL_TIMEOUT per step)


def _permanent(error: Exception) -> bool:
    """A 5xx answer: the server will say the same next time (no such mailbox, refused sender)."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in error.recipients.values())
    return isinstance(error, smtplib.SMTPResponseException) and error.smtp_code >= 500


def _claim(email_id: int) -> OutgoingEmail | None:
    now = timezone.now()
    claimed = (
        OutgoingEmail.objects.filter(pk=email_id, sent_at=None, failed_at=None)
        .filter(Q(claimed_until=None) | Q(claimed_until__lt=now))
        .update(claimed_until=now + CLAIM, attempts=F("attempts") + 1)
    )
    return OutgoingEmail.objects.get(pk=email_id) if claimed == 1 else None


def _deliver(email: OutgoingEmail) -> None:
    message = EmailMultiAlternatives(
        subject=email.subject,
        body=email.text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[email.to],
        connection=get_connection(fail_silently=False),
    )
    if email.html:
        message.attach_alternative(email.html, "text/html")
    message.send()


@shared_task(
    name="mail.send",
    bind=True,
    max_retries=settings.MAIL_SEND_MAX_RETRIES,
    acks_late=True,
    time_limit=120,
    soft_time_limit=100,
)
def send(self, email_id: int) -> None:
    email = _claim(email_id)
    if email is None:
        return  # sent, given up on, or in another worker's hands
    try:
        _deliver(email)
    except TRANSIENT_SMTP_ERRORS as error:
        last = self.request.retries >= self.max_retries or _permanent(error)
        countdown = min(
            settings.MAIL_RETRY_BACKOFF * 2**self.request.retries, settings.MAIL_RETRY_BACKOFF_MAX
        )
        # Held until the retry is due, so the sweep does not send it early (backoff is the point);
        # if this worker dies, the sweep takes it after that.
        OutgoingEmail.objects.filter(pk=email.pk).update(
            claimed_until=None if last else timezone.now() + timedelta(seconds=countdown),
            last_error=repr(error)[:500],
            failed_at=timezone.now() if last else None,
        )
        if last:
            logger.error("Gave up sending e-mail %s after %s attempts: %r", email.pk, email.attempts, error)
            return
        logger.warning("E-mail %s not sent (%r); retrying in %ss.", email.pk, error, countdown)
        raise self.retry(exc=error, countdown=countdown) from error
    # Sent: the bodies may hold a link that acts on an account, or the owner's memories.
    OutgoingEmail.objects.filter(pk=email.pk).update(
        sent_at=timezone.now(), claimed_until=None, text="", html=""
    )


@shared_task(name="mail.sweep", ignore_result=True)
def sweep() -> int:
    """Queue again each unsent message nobody holds that is older than the grace time (a lost publish).

    A message waiting for its retry's countdown is not held: queueing it again is harmless,
    the claim lets one of the two send it.
    """
    now = timezone.now()
    ids = list(
        OutgoingEmail.objects.filter(
            sent_at=None, failed_at=None, created_at__lt=now - timedelta(seconds=settings.MAIL_SWEEP_GRACE)
        )
        .filter(Q(claimed_until=None) | Q(claimed_until__lt=now))
        .order_by("created_at")
        .values_list("pk", flat=True)[:500]
    )
    for email_id in ids:
        services.email_publish(email_id=email_id)
    return len(ids)


@shared_task(name="mail.digests", ignore_result=True)
def digests() -> int:
    """From MAIL_DIGEST_HOUR (local time) on, one digest task per account still due today."""
    now = timezone.localtime()
    if now.hour < settings.MAIL_DIGEST_HOUR:
        return 0
    due = services.digest_users_due(day=now.date())
    from memories.tasks import enqueue

    for user_id in due:
        enqueue(digest, user_id, now.date().isoformat())
    return len(due)


@shared_task(name="mail.digest", ignore_result=True, acks_late=True)
def digest(user_id: int, day: str) -> None:
    services.digest_make(user_id=user_id, day=date.fromisoformat(day))
