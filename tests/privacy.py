"""How many examples each privacy property test runs: those compared with the independent
oracle (tests/memories/consent_oracle.py) — the gate, circles, A2A, prompts, stored replies.

At least PRIVACY_EXAMPLES in every run, CI's included (the default profile's 25 is for the
other property tests); `--hypothesis-profile=thorough` (tests/conftest.py) raises it with the
rest. KEEPSAKE_PRIVACY_EXAMPLES lowers it while working on one test, never in CI.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PRIVACY_EXAMPLES = max(
    settings.default.max_examples, int(os.environ.get("KEEPSAKE_PRIVACY_EXAMPLES", "100") or "100")
)

# The settings those tests share: no deadline (a world is built per example, on a shared
# machine), and fixtures that stay the same across examples are meant.
privacy_settings = settings(
    max_examples=PRIVACY_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
