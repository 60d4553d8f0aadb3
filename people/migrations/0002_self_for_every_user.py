from django.conf import settings
from django.db import migrations
from django.utils import timezone


def add_missing_self(apps, schema_editor):
    # Since the Self person stands in for the participant of an untagged memory (the
    # agents' gate reads its consent), an account made outside sign-up (an admin's
    # createsuperuser, say) gets the Self that sign-up would have made: granted.
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Person = apps.get_model("people", "Person")
    now = timezone.now()
    for user in User.objects.exclude(people__is_self=True).iterator():
        Person.objects.create(
            owner=user,
            display_name="Self",
            is_self=True,
            linked_user=user,
            consent_status="granted",
            consent_updated_at=now,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("people", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(add_missing_self, migrations.RunPython.noop)]
