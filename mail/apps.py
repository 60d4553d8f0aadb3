from __future__ import annotations

from django.apps import AppConfig


class MailConfig(AppConfig):
    """E-mail (issue #39): verified addresses, password reset, invitations by e-mail, the daily digest.

    Every message is written to the outbox in the request's transaction and sent by the
    worker (mail.tasks.send), never inside a request.
    """

    name = "mail"
    default_auto_field = "django.db.models.BigAutoField"
