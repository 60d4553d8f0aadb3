from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from agents.services import agent_create_builtins
from people.services import person_create_self


@transaction.atomic
def user_signup(*, username: str, password: str, email: str = "") -> AbstractBaseUser:
    """Create an account with its Self person (consent granted) and built-in agents."""
    user = get_user_model().objects.create_user(username=username, password=password, email=email)
    person_create_self(owner=user)
    agent_create_builtins(owner=user)
    return user
