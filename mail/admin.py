from __future__ import annotations

from django.contrib import admin

from mail.models import EmailAddress, OutgoingEmail


@admin.register(OutgoingEmail)
class OutgoingEmailAdmin(admin.ModelAdmin):
    """What was sent, what waits, and what was given up on (with the server's last answer).

    The bodies are not shown: they may hold a link that acts on an account, or an owner's memories.
    """

    list_display = ("kind", "to", "created_at", "attempts", "sent_at", "failed_at", "last_error")
    list_filter = ("kind",)
    fields = ("kind", "to", "subject", "created_at", "attempts", "sent_at", "failed_at", "last_error")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(EmailAddress)
class EmailAddressAdmin(admin.ModelAdmin):
    list_display = ("owner", "address", "verified_at", "pending", "daily_digest")
    search_fields = ("address", "pending")
    readonly_fields = ("owner", "address", "verified_at", "pending", "pending_sent_at")
