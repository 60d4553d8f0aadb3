"""Sign every browser out once, so that every signed-in browser is on the Sessions page.

From 0002 on, each sign-in leaves a SignedInSession row, and the middleware logs out an
authenticated session that has none (it was signed out from another browser). Sessions made
before the rows existed would be logged out at their next request anyway; ending them here
says so plainly. A new installation has no sessions: this does nothing there.
"""

from __future__ import annotations

from django.db import migrations


def end_sessions(apps, schema_editor) -> None:
    Session = apps.get_model("sessions", "Session")
    Session.objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_two_factor_passkeys_sessions"),
        ("sessions", "0001_initial"),
    ]

    operations = [migrations.RunPython(end_sessions, migrations.RunPython.noop)]
