from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from accounts.models import AccessToken


def access_token_list(*, owner: AbstractBaseUser) -> QuerySet[AccessToken]:
    return AccessToken.objects.filter(owner=owner).select_related("agent")


def access_token_get(*, owner: AbstractBaseUser, token_id: object) -> AccessToken:
    """The owner's token, or 404 — another owner's token does not exist for you."""
    return get_object_or_404(access_token_list(owner=owner), pk=token_id)
