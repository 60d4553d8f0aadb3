"""Consent tables: autovacuum analyzes them after a few changes, not after 50 + 10%.

The gate's SQL is planned on these tables' statistics. With PostgreSQL's defaults a
table of a few hundred people is analyzed again only after 50 + 10% of its rows
change, so after a handful of revocations the statistics can still say that every
person has granted consent: the planner then expects the gate's participant check
to refuse nothing and reads every participant of the table once per search (the
agents' kNN 6.1 ms instead of 1.6 at 10,000 memories; agents' hybrid search at
100,000 memories p50/p95 21.2/30.4 ms instead of 11.1/14.4). Here a change of 10
rows plus 2% of the table is enough.
"""

from django.db import migrations

TABLES = ("people_person", "people_personconsent")
SETTINGS = "autovacuum_analyze_threshold = 10, autovacuum_analyze_scale_factor = 0.02"


class Migration(migrations.Migration):
    dependencies = [
        ("people", "0006_person_relationship_birthday_photo"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[f"ALTER TABLE {table} SET ({SETTINGS})" for table in TABLES],
            reverse_sql=[
                f"ALTER TABLE {table} RESET (autovacuum_analyze_threshold, autovacuum_analyze_scale_factor)"
                for table in TABLES
            ],
        ),
    ]
