"""`python manage.py doctor [--fix]`: report (and repair) damage in the journal database."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memories.doctor import Finding, doctor_examine, doctor_repair

SAMPLE = 10


class Command(BaseCommand):
    help = (
        "Report problems: missing or stale embeddings, edges to deleted memories or across owners, "
        "participants of missing or foreign people, exact duplicates, broken replacement links, "
        "wrong or unmarked expiry. --fix repairs them; without it nothing is changed. "
        "Exits non-zero while problems remain."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--fix", action="store_true", help="Repair what is found.")

    def handle(self, *args, fix: bool, verbosity: int, **options) -> None:
        remaining = doctor_examine()
        self._report(remaining, verbosity=verbosity)
        if fix and any(finding.count for finding in remaining):
            doctor_repair(on_fixed=self._report_fixed)
            self.stdout.write("After repair:")
            remaining = doctor_examine()
            self._report(remaining, verbosity=verbosity)
        problems = sum(finding.count for finding in remaining)
        if problems:
            hint = "" if fix else " Run `manage.py doctor --fix` to repair."
            raise CommandError(f"{problems} problem(s) remain.{hint}", returncode=1)
        self.stdout.write(self.style.SUCCESS("No problems found."))

    def _report(self, findings: list[Finding], *, verbosity: int) -> None:
        for finding in findings:
            if finding.count:
                self.stdout.write(self.style.WARNING(f"  ✗ {finding.count} {finding.check.label}"))
                if verbosity >= 2:
                    shown = ", ".join(str(row_id) for row_id in finding.ids[:SAMPLE])
                    more = f" … and {finding.count - SAMPLE} more" if finding.count > SAMPLE else ""
                    self.stdout.write(f"      {shown}{more}")
            elif verbosity >= 1:
                self.stdout.write(f"  ✓ no {finding.check.label}")

    def _report_fixed(self, finding: Finding) -> None:
        self.stdout.write(self.style.SUCCESS(f"  fixed {finding.count} {finding.check.label}"))
