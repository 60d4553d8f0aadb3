from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import security_views, views
from config.routes import object_paths

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("login/", security_views.LoginView.as_view(), name="login"),
    path("login/verify/", security_views.login_verify, name="login_verify"),
    path("passkeys/options/", security_views.passkey_login_options, name="passkey_login_options"),
    path("passkeys/sign-in/", security_views.passkey_login, name="passkey_login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "password/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="accounts/password_change_done.html"),
        name="password_change_done",
    ),
    path("security/", security_views.account_security, name="account_security"),
    path("security/two-factor/", security_views.two_factor_setup, name="two_factor_setup"),
    path("security/two-factor/off/", security_views.two_factor_disable, name="two_factor_disable"),
    path(
        "security/recovery-codes/",
        security_views.recovery_codes_regenerate,
        name="recovery_codes_regenerate",
    ),
    path(
        "security/passkeys/options/",
        security_views.passkey_register_options,
        name="passkey_register_options",
    ),
    path("security/passkeys/", security_views.passkey_register, name="passkey_register"),
    path("security/passkeys/<int:passkey_id>/delete/", security_views.passkey_delete, name="passkey_delete"),
    *object_paths(security_views, "session", ["list", "end"], prefix="sessions/"),
    path("sessions/others/end/", security_views.sessions_end_others, name="sessions_end_others"),
]
