from __future__ import annotations

from django.urls import path

from mail import views

urlpatterns = [
    path("settings/email/", views.mail_settings, name="mail_settings"),
    path("settings/email/address/", views.mail_address_set, name="mail_address_set"),
    path("settings/email/remove/", views.mail_address_remove, name="mail_address_remove"),
    path("settings/email/digest/", views.mail_digest_set, name="mail_digest_set"),
    path("email/verify/<str:token>/", views.mail_verify, name="mail_verify"),
    path("password-reset/", views.password_reset, name="mail_password_reset"),
    path("password-reset/sent/", views.password_reset_sent, name="mail_password_reset_sent"),
    path(
        "password-reset/<uidb64>/<token>/",
        views.PasswordResetConfirmView.as_view(),
        name="mail_password_reset_confirm",
    ),
    path("password-reset/done/", views.password_reset_done, name="mail_password_reset_done"),
]
