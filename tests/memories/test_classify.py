from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from memories.classify import classify_sensitivity, find_credentials
from memories.models import Memory, MemoryParticipant, Sensitivity
from memories.services import (
    NewPersonSpec,
    ParticipantSpec,
    memory_create,
    memory_create_with_new_people,
    memory_update,
)
from people.models import Person
from people.services import person_create

# --- Sensitivity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Mum's biopsy results come back on Friday", "health"),
        ("Bob was diagnosed with diabetes", "health"),
        ("Anna is pregnant!", "health"),
        ("Booked my health checkup for Tuesday", "health"),
        ("Dad's check-up went fine", "health"),
        ("Started a new medication for my thyroid", "health"),
        ("Ben broke his wrist skateboarding", "health"),
        ("Started therapy for my anxiety", "mental_health"),
        ("My therapist suggested journaling", "mental_health"),
        ("Tom has been depressed since the winter", "mental_health"),
        ("We still owe 40k on the mortgage", "finance"),
        ("Carla asked me not to mention her salary", "finance"),
        ("Still paying off the credit card debt", "finance"),
        ("We got approved for the car loan", "finance"),
        ("Jen's business went bankrupt", "finance"),
        ("Lent Marco 500 quid", "finance"),
        ("Got laid off this morning", "work"),
        ("Anna was fired for being late", "work"),
        ("They fired him on the spot", "work"),
        ("Made redundant after eleven years", "work"),
        ("Our sex life has gone quiet", "sex_life"),
        ("Slept with Jordan after the party", "sex_life"),
        ("Tested for STIs at the clinic", "sex_life"),
        ("Leo came out as gay to his parents", "sexuality"),
        ("Sasha told me she's bisexual", "sexuality"),
        ("Fasting for Ramadan starts next week", "religion"),
        ("Went to Mass with Grandma", "religion"),
        ("Voted Green for the first time", "politics"),
        ("Joined the Labour Party today", "politics"),
        ("Anna and Tom are getting divorced", "relationship_breakdown"),
        ("Bob broke up with Sam last night", "relationship_breakdown"),
        ("The custody hearing is next week", "relationship_breakdown"),
        ("The rapist who attacked her got eight years", "abuse"),
        ("Lucy told me her ex was abusive", "abuse"),
        ("Dad got a letter from his solicitor about the lawsuit", "legal"),
        ("Bob was arrested at the protest", "legal"),
        ("I changed my bank password after the phishing email", "credentials"),
        ("Never tell anyone the PIN for the safe", "credentials"),
        ("Kate told me in confidence that she is leaving", "confidence"),
        ("Don't tell anyone, but Ben is proposing", "confidence"),
    ],
)
def test_sensitive_topics_are_classified_sensitive(text, category):
    guess = classify_sensitivity(body=text)
    assert guess.sensitivity == Sensitivity.SENSITIVE
    assert category in guess.categories


@pytest.mark.parametrize(
    "text",
    [
        "We played on the tennis court all afternoon",
        "I rolled the pastry with grandma's pin",
        "Anna loves jazz",
        "Picnic by the river with Bob",
        # Everyday meanings of words that are sensitive in other phrases.
        "Fired up about the new oven, baked three loaves",
        "Bob's team got fired up after the half-time talk",
        "Fired the first pots in the kiln",
        "The meeting broke up early so we got ice cream",
        "The cake came out perfectly this time",
        "Separated the eggs for the meringue",
        "Slept with the window open",
        "Praying it doesn't rain for the barbecue",
        "The oilseed rape fields are bright yellow",
        "Tom owes me a pint",
        "What a stroke of luck!",
        "Doctor Who marathon at Bob's",
        "Day trip to Essex with the kids",
        "Ran the assault course at Ellie's party",
        "Lent Priya my copy of Middlemarch",
        "Sick of the traffic on the ring road",
    ],
)
def test_everyday_text_is_personal(text):
    guess = classify_sensitivity(body=text)
    assert guess.sensitivity == Sensitivity.PERSONAL
    assert guess.categories == ()


def test_words_are_matched_whole_never_inside_other_words():
    # "the rapist" is sensitive for what it says, not because "therapist" hides in it,
    # and "therapist" is found as itself.
    assert classify_sensitivity(body="the rapist was sentenced").categories[0] == "abuse"
    assert "mental_health" not in classify_sensitivity(body="the rapist was sentenced").categories
    assert classify_sensitivity(body="my therapist").categories == ("mental_health",)
    for text in ("Essex", "Sussex", "therapeutic walk", "a sicker joke", "scrapes", "debtor-free"):
        assert classify_sensitivity(body=text).sensitivity == Sensitivity.PERSONAL, text


@pytest.mark.parametrize(
    "text",
    [
        # Accepted false positives: where a word's everyday use cannot be told apart,
        # the list over-marks; a memory wrongly marked sensitive costs one click.
        "The hospital car park now takes card payments",
        "Played Monopoly; Leo went bankrupt in twenty minutes",
        "Sam's dad is a police officer",
    ],
)
def test_accepted_false_positives_err_on_the_sensitive_side(text):
    assert classify_sensitivity(body=text).sensitivity == Sensitivity.SENSITIVE


def test_title_counts_for_sensitivity():
    assert classify_sensitivity(title="Hospital visit", body="Brought grapes").sensitivity == "sensitive"


def test_memory_without_sensitivity_gets_the_classified_one(alice):
    memory = memory_create(owner=alice, body="Bob starts chemo on Monday")
    memory.refresh_from_db()
    assert memory.sensitivity == Sensitivity.SENSITIVE
    plain = memory_create(owner=alice, body="Bob makes great pancakes")
    plain.refresh_from_db()
    assert plain.sensitivity == Sensitivity.PERSONAL


def test_owner_choice_of_sensitivity_always_wins(alice):
    memory = memory_create(owner=alice, body="Bob starts chemo on Monday", sensitivity=Sensitivity.PUBLIC)
    memory.refresh_from_db()
    assert memory.sensitivity == Sensitivity.PUBLIC
    memory_update(memory=memory, body="Bob finished chemo!", sensitivity=Sensitivity.PERSONAL)
    memory.refresh_from_db()
    assert memory.sensitivity == Sensitivity.PERSONAL


# --- Credentials -----------------------------------------------------------------------------

SECRETS = {
    "password-is": "My gmail password is hunter2",
    "password-plain-word": "the wifi password is swordfish",
    "password-colon": "Router admin password: Tr0ub4dor&3",
    "quoted": 'Bob\'s password is "correct horse"',
    "pin": "Mum's card PIN is 4821",
    "card": "Card for the hotel: 4111 1111 1111 1111, exp 12/29",
    "amex": "Amex 3782-822463-10005",
    "aws": "AWS key AKIAIOSFODNN7EXAMPLE for the backup bucket",
    "github": "token ghp_" + "A1b2C3d4E5" * 4,
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "openai": "sk-proj-" + "abcDEF123_" * 3,
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH "
    "PRIVATE KEY-----",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "url": "Backups go to postgres://keepsake:s3cr3t@db.example.org/main",
}


@pytest.mark.parametrize("text", SECRETS.values(), ids=SECRETS.keys())
def test_secrets_are_detected(text):
    assert find_credentials(text)


@pytest.mark.parametrize(
    "text",
    [
        "The wifi password is on the fridge",
        "I forgot my password again",
        "My password was changed yesterday",
        "The password is too short, they said",
        "My password is my dog's name",
        "Order number 1234567890123456 shipped",  # fails Luhn
        "Call me on +44 20 7946 0958",
        "Card 4111 1111 1111 1112",  # a typo: fails Luhn, nothing to protect
    ],
)
def test_talking_about_secrets_is_not_refused(text):
    assert find_credentials(text) == []


def test_password_like_word_after_is_is_refused_an_accepted_false_positive():
    # "is" followed by a plain word is taken as the password itself: refusing
    # "the password is Paris" is better than storing "the password is swordfish".
    assert find_credentials("The password is Paris")


@pytest.mark.parametrize("text", SECRETS.values(), ids=SECRETS.keys())
def test_memory_with_a_secret_is_refused_and_nothing_is_saved(alice, text):
    bob = person_create(owner=alice, display_name="Bob")
    people_before = Person.objects.filter(owner=alice).count()
    with pytest.raises(ValidationError) as excinfo:
        memory_create_with_new_people(
            owner=alice,
            body=text,
            participants=[ParticipantSpec(bob)],
            new_people=[NewPersonSpec("Carla")],
        )
    message = " ".join(excinfo.value.message_dict["body"])
    assert "Keepsake is not a secret store" in message
    assert not Memory.objects.filter(owner=alice).exists()
    assert not MemoryParticipant.objects.filter(memory__owner=alice).exists()
    assert Person.objects.filter(owner=alice).count() == people_before


def test_refusal_never_echoes_the_secret(alice):
    with pytest.raises(ValidationError) as excinfo:
        memory_create(owner=alice, body="my password is hunter2")
    assert "hunter2" not in str(excinfo.value)


def test_secret_in_the_title_is_refused_too(alice):
    with pytest.raises(ValidationError) as excinfo:
        memory_create(owner=alice, title="pwd: 8dj3!kd", body="Bank login")
    assert "title" in excinfo.value.message_dict
    assert not Memory.objects.filter(owner=alice).exists()


def test_explicit_sensitivity_does_not_make_a_secret_storable(alice):
    with pytest.raises(ValidationError):
        memory_create(owner=alice, body="password: hunter2", sensitivity=Sensitivity.SENSITIVE)
    assert not Memory.objects.filter(owner=alice).exists()


def test_editing_a_secret_into_a_memory_is_refused_and_leaves_it_unchanged(alice):
    bob = person_create(owner=alice, display_name="Bob")
    memory = memory_create(owner=alice, body="Bob set up the router", participants=[ParticipantSpec(bob)])
    with pytest.raises(ValidationError):
        memory_update(memory=memory, body="Router password: Tr0ub4dor&3", participants=[])
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.body == "Bob set up the router"
    assert list(stored.participants.values_list("person__display_name", flat=True)) == ["Bob"]


def test_memory_about_a_password_is_kept_and_marked_sensitive(alice):
    memory = memory_create(owner=alice, body="The wifi password is on the fridge")
    memory.refresh_from_db()
    assert memory.sensitivity == Sensitivity.SENSITIVE
