from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in, user_logged_out

        from accounts.sessions import signed_in_session_forget, signed_in_session_record

        # A signal, not a call in each view: every login() — Django's, ours, a test's
        # force_login — must leave a record, or that browser would be missing from the
        # Sessions page (and logged out by the middleware at its next request).
        def record(sender, request, user, **kwargs) -> None:
            if request is not None:
                signed_in_session_record(request=request, user=user)

        def forget(sender, request, user, **kwargs) -> None:
            if request is not None:
                signed_in_session_forget(request=request)

        # The admin site signs in through our log-in (both factors), never with its own form.
        from django.contrib import admin

        from accounts.security_views import admin_login

        admin.site.login = admin_login

        user_logged_in.connect(record, weak=False, dispatch_uid="accounts.signed_in_session_record")
        user_logged_out.connect(forget, weak=False, dispatch_uid="accounts.signed_in_session_forget")
