"""The Share panel's prediction against the independent oracle (tests/memories/consent_oracle.py).

For every memory, every circle its owner is in and every member, what the panel says
before sharing ("Sees it" / "Won't see it", circles.selectors.memory_share_preview, asked of
the gate with the share assumed) is what the oracle says that member may see once it is
shared; each "no" gives its true reason; and "Seen by N of M members" on a circle's page
counts exactly the members the oracle lets see it. Random worlds, after random changes.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import given

from circles.selectors import circle_members, circle_seen_counts, memory_share_preview
from tests.circles.test_circle_property import CircleWorld, _Rollback, world_spec
from tests.privacy import privacy_settings

pytestmark = [pytest.mark.django_db]


def _oracle_would_see(oracle, memory_id: str, circle_id: str, viewer_id: str) -> bool:
    """The oracle's answer for the memory as if it were shared into the circle."""
    share = (memory_id, circle_id)
    already = share in oracle.shares
    oracle.shares.add(share)
    try:
        return oracle.circle_may_see(
            oracle.memories[memory_id], oracle.circles[circle_id], viewer_id, alone=True
        )
    finally:
        if not already:
            oracle.shares.discard(share)


def check_predictions(world: CircleWorld, step: str) -> None:
    oracle = world.oracle
    for circle in world.circles:
        if circle is None:
            continue
        circle_id = str(circle.pk)
        members = {str(membership.user_id) for membership in circle_members(circle=circle)}
        assert members == set(oracle.circles[circle_id].members), step
        shared_here = []
        for memory in world.memories:
            if str(memory.pk) not in oracle.memories:
                continue
            memory.refresh_from_db()
            if str(memory.owner_id) not in members:
                continue  # the panel lists only circles the owner is in
            memory_id = str(memory.pk)
            previews = memory_share_preview(memory=memory, circle=circle)
            assert {str(preview.user.pk) for preview in previews} == members, step
            for preview in previews:
                viewer_id = str(preview.user.pk)
                expected = _oracle_would_see(oracle, memory_id, circle_id, viewer_id)
                where = f"{step}: memory {memory_id} ({memory.sensitivity}) in {circle.name} for {viewer_id}"
                assert preview.sees == expected, where
                if preview.sees:
                    continue
                why = " ".join(preview.reasons)
                blockers = oracle.circle_blockers(oracle.memories[memory_id], oracle.circles[circle_id])
                if blockers:
                    assert "has not consented" in why, where
                    assert any("consent" in action.label for action in preview.actions), where
                elif memory.sensitivity == "personal":
                    assert why.startswith("personal and not about them"), where
                    assert [action.label for action in preview.actions] == ["mark it public"], where
                elif memory.sensitivity == "sensitive":
                    assert why.startswith("sensitive"), where
            if (memory_id, circle_id) in oracle.shares:
                shared_here.append(memory)
        counts, member_count = circle_seen_counts(
            circle=circle, memory_ids=[memory.pk for memory in shared_here]
        )
        assert member_count == len(members), step
        for memory in shared_here:
            expected = sum(
                oracle.circle_may_see(
                    oracle.memories[str(memory.pk)], oracle.circles[circle_id], viewer_id, alone=True
                )
                for viewer_id in members
            )
            assert counts[memory.pk] == expected, f"{step}: seen by, memory {memory.pk} in {circle.name}"


@pytest.mark.longest
@privacy_settings
@given(spec=world_spec)
def test_the_share_panel_predicts_what_each_member_will_see(spec):
    try:
        with transaction.atomic():
            world = CircleWorld(spec)
            check_predictions(world, "built")
            for number, change in enumerate(spec["changes"]):
                world.apply(change)
                check_predictions(world, f"after change {number} {change}")
            raise _Rollback
    except _Rollback:
        pass
