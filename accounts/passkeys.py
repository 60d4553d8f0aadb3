"""Passkeys (WebAuthn) through py_webauthn: register from the Security page, sign in without a username.

- Registration asks for a discoverable credential (a passkey the authenticator keeps, so
  signing in needs no username) and user verification (a PIN, fingerprint or face). The
  challenge lives in the session for five minutes and is used once.
- Signing in with a passkey is a whole sign-in: the authenticator proved possession of the
  device and verified the person (user verification is *required*), which is two factors
  in one. On the second step of a password sign-in a passkey of that account is also accepted.
- The relying party is this site's host name (settings.WEBAUTHN_RP_ID overrides it); the
  origin must be the request's own scheme and host. Browsers allow WebAuthn only in a secure
  context: https, or http://localhost for development.
- The signature counter must grow when the authenticator keeps one; a counter that goes
  back means a cloned authenticator, and the sign-in is refused.
"""

from __future__ import annotations

import json
import time

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.crypto import salted_hmac
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from accounts.models import Passkey

REGISTRATION_CHALLENGE = "_ks_passkey_registration"
AUTHENTICATION_CHALLENGE = "_ks_passkey_authentication"
CHALLENGE_SECONDS = 300
MAX_PASSKEYS = 20
METHOD_PASSKEY = "passkey"


class PasskeyRefused(Exception):
    """The browser's answer did not prove what it had to; the message is safe to show."""


def _rp_id(request: HttpRequest) -> str:
    return settings.WEBAUTHN_RP_ID or request.get_host().rsplit(":", 1)[0].strip("[]")


def _origin(request: HttpRequest) -> str:
    return f"{request.scheme}://{request.get_host()}"


def user_handle(*, user: AbstractBaseUser) -> bytes:
    """The account's WebAuthn user handle: stable, opaque (no username or id readable in it)."""
    return salted_hmac("accounts.passkeys.user-handle", str(user.pk), algorithm="sha256").digest()


def _challenge_put(request: HttpRequest, key: str, challenge: bytes) -> None:
    request.session[key] = {"challenge": bytes_to_base64url(challenge), "at": time.time()}


def _challenge_take(request: HttpRequest, key: str) -> bytes:
    """The challenge the browser was given — once: it leaves the session whatever happens next."""
    stored = request.session.pop(key, None)
    if not isinstance(stored, dict) or time.time() - stored.get("at", 0) > CHALLENGE_SECONDS:
        raise PasskeyRefused("The request expired. Try again.")
    return base64url_to_bytes(stored["challenge"])


def passkey_list(*, owner: AbstractBaseUser):
    return Passkey.objects.filter(owner=owner)


def passkey_get(*, owner: AbstractBaseUser, passkey_id: object) -> Passkey:
    """One of the owner's passkeys, or 404."""
    return get_object_or_404(passkey_list(owner=owner), pk=passkey_id)


def passkey_registration_options(*, request: HttpRequest, user: AbstractBaseUser) -> str:
    """The JSON for navigator.credentials.create(); its challenge kept in the session."""
    options = generate_registration_options(
        rp_id=_rp_id(request),
        rp_name=settings.WEBAUTHN_RP_NAME,
        user_name=user.get_username(),
        user_id=user_handle(user=user),
        user_display_name=user.get_username(),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(id=bytes(p.credential_id)) for p in passkey_list(owner=user)
        ],
    )
    _challenge_put(request, REGISTRATION_CHALLENGE, options.challenge)
    return options_to_json(options)


def passkey_register(*, request: HttpRequest, user: AbstractBaseUser, name: str, credential: str) -> Passkey:
    """Check the authenticator's answer and keep the new passkey under `name`."""
    # Spent first, whatever follows: a challenge is answered once.
    challenge = _challenge_take(request, REGISTRATION_CHALLENGE)
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError("Give the passkey a name, such as the device it is on.")
    if len(name) > 60:
        raise ValidationError("Keep the name under 60 characters.")
    if passkey_list(owner=user).count() >= MAX_PASSKEYS:
        raise ValidationError(f"You have {MAX_PASSKEYS} passkeys: delete one first.")
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=_rp_id(request),
            expected_origin=_origin(request),
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise PasskeyRefused("The passkey could not be checked. Try again.") from exc
    try:
        with transaction.atomic():
            return Passkey.objects.create(
                owner=user,
                name=name,
                credential_id=verified.credential_id,
                public_key=verified.credential_public_key,
                sign_count=verified.sign_count,
                device_type=str(getattr(verified.credential_device_type, "value", ""))[:20],
                backed_up=verified.credential_backed_up,
            )
    except IntegrityError as exc:
        raise PasskeyRefused("That passkey is already registered.") from exc


def passkey_authentication_options(*, request: HttpRequest) -> str:
    """The JSON for navigator.credentials.get(): no account named, any passkey of this site."""
    options = generate_authentication_options(
        rp_id=_rp_id(request), user_verification=UserVerificationRequirement.REQUIRED
    )
    _challenge_put(request, AUTHENTICATION_CHALLENGE, options.challenge)
    return options_to_json(options)


def passkey_authenticate(*, request: HttpRequest, credential: str) -> Passkey:
    """The passkey whose signature over this session's challenge checks out; its counter kept."""
    challenge = _challenge_take(request, AUTHENTICATION_CHALLENGE)
    try:
        data = json.loads(credential) if isinstance(credential, str) else credential
        credential_id = base64url_to_bytes(str(data["rawId"]))
        response_handle = (
            data["response"].get("userHandle") if isinstance(data.get("response"), dict) else None
        )
        claimed_handle = base64url_to_bytes(str(response_handle)) if response_handle else None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise PasskeyRefused("The passkey could not be checked. Try again.") from exc
    with transaction.atomic():
        passkey = (
            Passkey.objects.select_for_update()
            .select_related("owner")
            .filter(credential_id=credential_id, owner__is_active=True)
            .first()
        )
        if passkey is None:
            raise PasskeyRefused("This passkey is not registered here. Sign in with your password.")
        # A discoverable passkey names its account; it must be the one the passkey belongs to.
        if claimed_handle is not None and claimed_handle != user_handle(user=passkey.owner):
            raise PasskeyRefused("The passkey could not be checked. Try again.")
        try:
            verified = verify_authentication_response(
                credential=data,
                expected_challenge=challenge,
                expected_rp_id=_rp_id(request),
                expected_origin=_origin(request),
                credential_public_key=bytes(passkey.public_key),
                credential_current_sign_count=passkey.sign_count,
                require_user_verification=True,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise PasskeyRefused("The passkey could not be checked. Try again.") from exc
        passkey.sign_count = verified.new_sign_count
        passkey.last_used_at = timezone.now()
        passkey.save(update_fields=["sign_count", "last_used_at"])
    return passkey


def passkey_delete(*, passkey: Passkey) -> None:
    passkey.delete()
