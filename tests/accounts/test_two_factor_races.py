"""One code, two requests at the same moment: exactly one of them signs in.

Threads on their own database connections (a transactional test: the rows are committed
for them to see). The TOTP device row is locked while a code is checked, and a recovery
code is spent by a conditional UPDATE; without either, both requests would pass.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from accounts.services import user_signup
from accounts.two_factor import recovery_code_use, totp_verify
from tests.accounts.two_factor_helpers import enrol, totp_code

pytestmark = pytest.mark.django_db(transaction=True)

ATTEMPTS = 6


def _at_once(check) -> list[bool]:
    barrier = threading.Barrier(ATTEMPTS)
    results: list[bool] = []
    lock = threading.Lock()

    def attempt() -> None:
        try:
            barrier.wait()
            outcome = check()
            with lock:
                results.append(outcome)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt) for _ in range(ATTEMPTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_one_app_code_sent_six_times_at_once_passes_once():
    alice = user_signup(username="alice", password="correct horse battery")
    device, _codes = enrol(alice)
    code = totp_code(device, steps_ahead=1)
    results = _at_once(lambda: totp_verify(user=alice, code=code))
    assert len(results) == ATTEMPTS
    assert results.count(True) == 1


def test_one_recovery_code_sent_six_times_at_once_passes_once():
    alice = user_signup(username="alice", password="correct horse battery")
    _device, codes = enrol(alice)
    results = _at_once(lambda: recovery_code_use(user=alice, code=codes[0]))
    assert len(results) == ATTEMPTS
    assert results.count(True) == 1
