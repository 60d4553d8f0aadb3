"""Writes for e-mail: addresses and their verification, the outbox, invitations, the digest.

Nothing here talks to an SMTP server. `email_queue` renders a message and stores it in
the caller's transaction; after commit the worker is asked to send it (mail.tasks.send),
and the sweep (mail.tasks.sweep) sends whatever that publish lost. A request's work is
therefore never undone by a mail server that is down, and never waits for one.

Privacy (issue #39): a message names only what its recipient may already know. An
invitation names the inviter (their username) and, for a circle, the circle; never a
person as someone's journal names them, never a memory. The digest goes only to the
account's own verified address and speaks only of that account's inbox and its own
memories (the owner's view: nothing in it is another person's).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.tokens import default_token_generator
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from mail.models import DigestDay, EmailAddress, EmailKind, OutgoingEmail

logger = logging.getLogger(__name__)

VERIFY_SALT = "mail.verify-address"
VERIFY_MAX_AGE = timedelta(days=3)
DIGEST_ON_THIS_DAY_LIMIT = 10
DIGEST_NOTIFICATIONS_LIMIT = 50
EXCERPT_CHARS = 200


def base_url() -> str:
    """Where links in a message point when no request says (the digest, built by the worker)."""
    return settings.KEEPSAKE_BASE_URL.rstrip("/")


# --- the outbox -----------------------------------------------------------------------------


def email_queue(
    *, kind: str, to: str, template: str, context: dict, owner: AbstractBaseUser | None = None
) -> OutgoingEmail:
    """Render `mail/email/<template>_subject.txt`, `.txt` and `.html` and queue the message.

    Call inside the transaction of the work the message is about: it is sent only if that
    commits, by the worker, after commit.
    """
    context = {"site_url": context.get("site_url") or base_url(), **context}
    subject = " ".join(render_to_string(f"mail/email/{template}_subject.txt", context).split())
    email = OutgoingEmail.objects.create(
        kind=kind,
        owner=owner,
        to=to,
        subject=subject[:200],
        text=render_to_string(f"mail/email/{template}.txt", context),
        html=render_to_string(f"mail/email/{template}.html", context),
    )
    transaction.on_commit(lambda: email_publish(email_id=email.pk), robust=True)
    return email


def email_publish(*, email_id: int) -> bool:
    from mail import tasks
    from memories.tasks import enqueue

    return enqueue(tasks.send, email_id)


# --- an account's address -------------------------------------------------------------------


def email_address_for(*, user: AbstractBaseUser) -> EmailAddress:
    found = EmailAddress.objects.filter(owner=user).first()
    return found or EmailAddress(owner=user)


def verified_address(*, user_id: int) -> str:
    """The account's verified address, or "" (nothing is ever sent to an unverified one but its link)."""
    row = EmailAddress.objects.filter(owner_id=user_id).exclude(address="").exclude(verified_at=None).first()
    return row.address if row is not None else ""


def _address_taken(address: str, *, by_other_than: int) -> bool:
    return (
        EmailAddress.objects.filter(address__iexact=address)
        .exclude(verified_at=None)
        .exclude(owner_id=by_other_than)
        .exists()
    )


def verify_token(*, user_id: int, address: str) -> str:
    return signing.dumps({"user": user_id, "address": address.lower()}, salt=VERIFY_SALT, compress=True)


@transaction.atomic
def email_address_request(*, user: AbstractBaseUser, address: str, site_url: str) -> EmailAddress:
    """Set the address waiting for verification and queue its link; the verified one stays until then.

    The same answer whether or not another account has verified it: that is only said to
    whoever follows the link (they hold the mailbox).
    """
    address = address.strip()
    validate_email(address)
    row, _ = EmailAddress.objects.select_for_update().get_or_create(owner=user)
    if row.is_verified and row.address.lower() == address.lower():
        row.pending, row.pending_sent_at = "", None
        row.save(update_fields=["pending", "pending_sent_at"])
        return row
    row.pending, row.pending_sent_at = address, timezone.now()
    row.save(update_fields=["pending", "pending_sent_at"])
    token = verify_token(user_id=user.pk, address=address)
    email_queue(
        kind=EmailKind.VERIFY,
        to=address,
        owner=user,
        template="verify_address",
        context={
            "username": user.get_username(),
            "link": site_url + reverse("mail_verify", args=[token]),
            "site_url": site_url,
            "days": VERIFY_MAX_AGE.days,
        },
    )
    return row


class VerificationInvalid(ValidationError):
    """A verification link that cannot be used; the message says why, naming no account."""


def verify_token_check(*, token: str) -> tuple[int, str]:
    try:
        data = signing.loads(token, salt=VERIFY_SALT, max_age=VERIFY_MAX_AGE)
    except signing.SignatureExpired:
        raise VerificationInvalid(
            "This link has expired. Ask for a new one on your e-mail settings."
        ) from None
    except signing.BadSignature:
        raise VerificationInvalid("This link is not valid.") from None
    return int(data["user"]), str(data["address"])


@transaction.atomic
def email_address_verify(*, token: str) -> EmailAddress:
    """Follow a verification link: the waiting address becomes the account's verified one."""
    user_id, address = verify_token_check(token=token)
    row = EmailAddress.objects.select_for_update().filter(owner_id=user_id).first()
    if row is None or row.pending.lower() != address:
        if row is not None and row.is_verified and row.address.lower() == address:
            return row  # followed twice: already done
        raise VerificationInvalid("This link was replaced by a newer one, or the address was changed.")
    if _address_taken(address, by_other_than=user_id):
        raise VerificationInvalid("Another account has verified this address.")
    row.address, row.verified_at = row.pending, timezone.now()
    row.pending, row.pending_sent_at = "", None
    try:
        with transaction.atomic():
            row.save(update_fields=["address", "verified_at", "pending", "pending_sent_at"])
    except IntegrityError:  # verified by another account at the same moment
        raise VerificationInvalid("Another account has verified this address.") from None
    return row


@transaction.atomic
def email_address_remove(*, user: AbstractBaseUser) -> None:
    """No address: no reset by e-mail, no digest."""
    EmailAddress.objects.filter(owner=user).update(
        address="", verified_at=None, pending="", pending_sent_at=None, daily_digest=False
    )


def email_digest_set(*, user: AbstractBaseUser, daily_digest: bool) -> EmailAddress:
    row = email_address_for(user=user)
    if daily_digest and not row.is_verified:
        raise ValidationError("Verify an e-mail address first: the digest goes only to a verified address.")
    row.daily_digest = daily_digest
    row.save()
    return row


# --- password reset -------------------------------------------------------------------------


def password_reset_request(*, address: str, site_url: str) -> int:
    """Queue a reset link to each active account whose verified address this is (at most one).

    Returns how many were queued; the caller answers the same either way, so the page
    tells nobody whether an account has this address.
    """
    users = get_user_model().objects.filter(
        is_active=True,
        email_address__address__iexact=address.strip(),
        email_address__verified_at__isnull=False,
    )
    queued = 0
    with transaction.atomic():
        for user in users:
            if not user.has_usable_password():
                continue
            uid = urlsafe_base64_encode(force_bytes(user.pk))
            token = default_token_generator.make_token(user)
            email_queue(
                kind=EmailKind.PASSWORD_RESET,
                to=user.email_address.address,
                owner=user,
                template="password_reset",
                context={
                    "username": user.get_username(),
                    "link": site_url + reverse("mail_password_reset_confirm", args=[uid, token]),
                    "site_url": site_url,
                    "hours": settings.PASSWORD_RESET_TIMEOUT // 3600,
                },
            )
            queued += 1
    return queued


# --- invitations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipient:
    """Whom an invitation goes to: an e-mail address, or an account (then to its inbox)."""

    address: str = ""
    user: AbstractBaseUser | None = None

    @property
    def label(self) -> str:
        return self.address or (self.user.get_username() if self.user is not None else "")

    @property
    def where(self) -> str:
        """How it went, for the sender's page: "by e-mail to …" or "to …'s inbox"."""
        return f"by e-mail to {self.address}" if self.address else f"to {self.label}'s inbox"


def invitation_recipient(*, to: str, inviter: AbstractBaseUser) -> Recipient:
    """`to` is an e-mail address (it has an @) or a username. A username that names no
    account, or the inviter's own, is refused with a message saying so."""
    to = to.strip()
    if not to:
        raise ValidationError("Give an e-mail address or a username.")
    if "@" in to:
        validate_email(to)
        return Recipient(address=to)
    user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: to}, is_active=True).first()
    if user is None:
        raise ValidationError(f"No account is called “{to}”. Check the spelling, or send an e-mail instead.")
    if user.pk == inviter.pk:
        raise ValidationError("That is your own account.")
    return Recipient(user=user)


def _invitation_deliver(
    *,
    recipient: Recipient,
    inviter: AbstractBaseUser,
    notice_kind: str,
    notice: str,
    email_kind: str,
    link: str,
    context: dict,
) -> None:
    """An invitation to an account's inbox (`notice`), or by e-mail (`email_kind`'s template)."""
    from inbox.services import notify

    site_url = context["site_url"]
    if recipient.user is not None:
        notify(recipient=recipient.user, kind=notice_kind, text=notice, url=link.removeprefix(site_url))
        return
    email_queue(
        kind=email_kind,
        to=recipient.address,
        owner=inviter,
        template=email_kind.value,
        context={"inviter": inviter.get_username(), "link": link, **context},
    )


def circle_invitation_deliver(
    *,
    recipient: Recipient,
    inviter: AbstractBaseUser,
    circle_name: str,
    link: str,
    expires_at: datetime,
    site_url: str,
) -> None:
    """Send a circle's invite link (made for this recipient) by e-mail or to an account's inbox.

    It names the inviter and the circle: whoever holds the link sees both on its page anyway.
    """
    from inbox.models import NotificationKind

    _invitation_deliver(
        recipient=recipient,
        inviter=inviter,
        notice_kind=NotificationKind.CIRCLE_INVITE,
        email_kind=EmailKind.CIRCLE_INVITE,
        notice=f"{inviter.get_username()} invites you to join the circle {circle_name}.",
        link=link,
        context={"circle": circle_name, "expires_at": expires_at, "site_url": site_url},
    )


def link_invitation_deliver(
    *, recipient: Recipient, inviter: AbstractBaseUser, link: str, expires_at: datetime, site_url: str
) -> None:
    """Send a link invitation by e-mail or to an account's inbox.

    It names the inviter only: never how their journal names the person (that name is
    the inviter's, and the address may not be that person's at all).
    """
    from inbox.models import NotificationKind

    _invitation_deliver(
        recipient=recipient,
        inviter=inviter,
        notice_kind=NotificationKind.LINK_INVITE,
        email_kind=EmailKind.LINK_INVITE,
        notice=f"{inviter.get_username()} invites you to link your account to the entry about you in "
        "their journal, so that you decide who may see memories about you.",
        link=link,
        context={"expires_at": expires_at, "site_url": site_url},
    )


# --- the daily digest -----------------------------------------------------------------------


def digest_users_due(*, day: date) -> list[int]:
    """Accounts that asked for the digest, with a verified address, and none made for `day`."""
    return list(
        EmailAddress.objects.filter(daily_digest=True, owner__is_active=True)
        .exclude(address="")
        .exclude(verified_at=None)
        .exclude(owner__digest_days__day=day)
        .values_list("owner_id", flat=True)
    )


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rstrip() + "…"


@transaction.atomic
def digest_make(*, user_id: int, day: date) -> OutgoingEmail | None:
    """The day's digest for one account: at most one per day, whoever asks and however often.

    Claims (user, day) first: a second run (a redelivered task, two beats) finds the row
    and does nothing. Says nothing, and sends nothing, on a day with nothing new.
    """
    from inbox.models import Notification
    from memories.selectors import memory_on_this_day

    address = verified_address(user_id=user_id)
    row = EmailAddress.objects.filter(owner_id=user_id, daily_digest=True).first()
    if not address or row is None:
        return None
    previous = DigestDay.objects.filter(owner_id=user_id).order_by("-day").first()
    try:
        with transaction.atomic():
            claim = DigestDay.objects.create(owner_id=user_id, day=day)
    except IntegrityError:
        return None
    user = row.owner
    since = previous.created_at if previous is not None else timezone.now() - timedelta(days=1)
    notifications = list(
        Notification.objects.filter(recipient_id=user_id, created_at__gt=since)[:DIGEST_NOTIFICATIONS_LIMIT]
    )
    # The owner's own memories, the owner's view (memories.selectors, as the On this day page).
    memories = list(memory_on_this_day(owner=user, day=day)[:DIGEST_ON_THIS_DAY_LIMIT])
    if not notifications and not memories:
        return None
    site = base_url()
    on_this_day = [
        {
            "title": memory.title or _excerpt(memory.body),
            "excerpt": _excerpt(memory.body) if memory.title else "",
            "year": timezone.localtime(memory.occurred_at).year,
            "ago": day.year - timezone.localtime(memory.occurred_at).year,
            "link": site + reverse("memory_detail", args=[memory.pk]),
        }
        for memory in memories
    ]
    items = [
        {
            "text": notification.text,
            "link": site + notification.url if notification.url.startswith("/") else "",
        }
        for notification in notifications
    ]
    email = email_queue(
        kind=EmailKind.DIGEST,
        to=address,
        owner=user,
        template="digest",
        context={
            "username": user.get_username(),
            "day": day,
            "notifications": items,
            "on_this_day": on_this_day,
            "inbox_link": site + reverse("inbox"),
            "on_this_day_link": site + reverse("memory_on_this_day"),
            "settings_link": site + reverse("mail_settings"),
        },
    )
    DigestDay.objects.filter(pk=claim.pk).update(sent=True)
    return email
