"""Rule-based sensitivity classifier and credential detector.

Two different jobs:

* `classify_sensitivity` proposes a sensitivity when the owner gave none:
  text touching health, mental health, money, a relationship breaking down,
  legal trouble or credentials is `sensitive`, everything else `personal`.
  It never proposes `public`, and an explicit choice by the owner always wins.
  It is a keyword list, so it over-marks on purpose ("tennis court" does not
  match, but "the meeting broke up early" does): a memory wrongly marked
  sensitive costs a click, one wrongly left personal can be shown too widely.

* `find_credentials` looks for actual secrets (private keys, well-known API
  key and token formats, "password: …" with a value, payment card numbers
  that pass the Luhn check). Those are refused outright by memory_create and
  memory_update: Keepsake is not a secret store. Talking *about* a password
  ("the wifi password is on the fridge") is allowed and marked sensitive.

The token formats are public facts (the prefixes providers document so that
leaked keys can be recognised); the patterns below are written for this project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from memories.models import Sensitivity

# --- Sensitivity -----------------------------------------------------------------------


def _any(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


SENSITIVE_CATEGORIES: dict[str, re.Pattern[str]] = {
    "health": _any(
        r"diagnos\w*",
        r"doctors?",
        r"doctor's",
        r"hospitals?",
        r"hospitali[sz]\w*",
        r"surgery",
        r"surgeon",
        r"cancer",
        r"tumou?rs?",
        r"chemo\w*",
        r"diabet\w*",
        r"HIV",
        r"pregnan\w*",
        r"miscarr\w*",
        r"prescri\w*",
        r"medication",
        r"meds",
        r"symptoms?",
        r"blood pressure",
        r"allerg\w*",
        r"asthma",
        r"migraines?",
        r"illness",
        r"diseases?",
        r"infection",
        r"injur\w*",
        r"fractur\w*",
        r"physio\w*",
        r"clinic",
        r"dentist",
        r"MRI",
        r"x-?rays?",
        r"covid",
        r"biopsy",
        r"dementia",
        r"alzheimer'?s",
        r"stroke",
        r"heart attack",
        r"sick",
        r"fever",
        r"flu",
        r"IVF",
        r"fertility",
        r"contracepti\w*",
        r"disabilit\w*",
    ),
    "mental_health": _any(
        r"mental health",
        r"depress\w*",
        r"anxiety",
        r"anxious",
        r"panic attacks?",
        r"therapy",
        r"therapists?",
        r"psychiatr\w*",
        r"psycholog\w*",
        r"counsell?ing",
        r"counsell?ors?",
        r"suicid\w*",
        r"self[- ]harm\w*",
        r"PTSD",
        r"trauma\w*",
        r"bipolar",
        r"ADHD",
        r"eating disorder",
        r"anorexi\w*",
        r"bulimi\w*",
        r"antidepressants?",
        r"burn-?out",
        r"burned out",
        r"OCD",
        r"schizophren\w*",
        r"addict\w*",
        r"rehab",
        r"alcoholi\w*",
    ),
    "finance": _any(
        r"salary",
        r"wages?",
        r"debts?",
        r"loans?",
        r"mortgage",
        r"bankrupt\w*",
        r"bank account",
        r"account number",
        r"sort code",
        r"IBAN",
        r"credit score",
        r"credit card",
        r"overdra\w*",
        r"tax return",
        r"taxes",
        r"owes?",
        r"owed",
        r"income",
        r"pay ?checks?",
        r"payslips?",
        r"savings",
        r"inheritance",
        r"pension",
        r"net worth",
        r"arrears",
        r"repossess\w*",
        r"invest(?:ed|ing|ments?)",
        r"bitcoin",
        r"crypto\w*",
    ),
    "relationship_breakdown": _any(
        r"divorc\w*",
        r"separated",
        r"separation",
        r"broke up",
        r"break-?ups?",
        r"breaking up",
        r"split up",
        r"splitting up",
        r"affair",
        r"cheat(?:ed|ing|s)? on",
        r"custody",
        r"estranged",
        r"no longer (?:speak|talk)\w*",
        r"domestic (?:abuse|violence)",
        r"abusive",
    ),
    "legal": _any(
        r"lawsuits?",
        r"sued",
        r"suing",
        r"lawyers?",
        r"attorneys?",
        r"solicitors?",
        r"in court",
        r"court (?:case|date|hearing|order)s?",
        r"arrest\w*",
        r"police",
        r"convict\w*",
        r"criminal record",
        r"probation",
        r"parole",
        r"charged with",
        r"deport\w*",
        r"immigration status",
        r"subpoena\w*",
        r"indict\w*",
        r"prison",
        r"jail",
        r"legal action",
        r"tribunal",
        r"restraining order",
    ),
    "credentials": re.compile(
        r"\b(?:passwords?|passcodes?|passphrases?|pin (?:code|number)|2fa|two[- ]factor|recovery codes?"
        r"|security questions?|login details|credentials|api keys?|private keys?"
        r"|seed phrase|recovery phrase)\b"
        r"|\b(?-i:PIN)\b",
        re.IGNORECASE,
    ),
}


@dataclass(frozen=True)
class SensitivityGuess:
    sensitivity: str
    categories: tuple[str, ...]
    matches: tuple[str, ...]

    @property
    def reason(self) -> str:
        if not self.categories:
            return "nothing sensitive recognised"
        return ", ".join(self.categories).replace("_", " ") + " (" + ", ".join(self.matches) + ")"


def classify_sensitivity(*, body: str, title: str = "") -> SensitivityGuess:
    """Propose a sensitivity: `sensitive` when any category matches, else `personal`."""
    text = f"{title}\n{body}"
    categories: list[str] = []
    matches: list[str] = []
    for category, pattern in SENSITIVE_CATEGORIES.items():
        match = pattern.search(text)
        if match:
            categories.append(category)
            matches.append(match.group(0))
    if categories:
        return SensitivityGuess(Sensitivity.SENSITIVE, tuple(categories), tuple(matches))
    return SensitivityGuess(Sensitivity.PERSONAL, (), ())


# --- Credentials ------------------------------------------------------------------------


@dataclass(frozen=True)
class CredentialFinding:
    kind: str  # what it looks like, for the message; the secret itself is never echoed


_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})\b")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("an API key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an access token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("an access token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    ("a password in a link", re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:[^\s/@]+@", re.IGNORECASE)),
)

_SECRET_LABEL = (
    r"(?:password|passwd|passcode|passphrase|pass phrase|pwd|pin(?: code| number)?|api[ _-]?key"
    r"|secret key|access key|(?:auth|access|api|bearer) token)"
)
_LABELLED_SECRET = re.compile(
    r"\b" + _SECRET_LABEL + r"\s*(?P<sep>is|was|=|:|->)\s*(?P<quote>[\"'`“‘]?)(?P<value>[^\s\"'`”’]+)",
    re.IGNORECASE,
)

# Words that follow "the password is …" when the sentence is *about* a password
# rather than containing one. Anything else after "password is" is taken as the
# secret itself: better to refuse "my password is swordfish" than store it.
_NOT_A_SECRET = frozenset(
    """
    a an the my your his her our their its this that these those same different new old
    on in at under behind inside near by with without for from of to into onto written
    stored saved kept taped stuck printed somewhere here there everywhere nowhere
    wrong right correct incorrect too very so still now not also just really probably
    definitely actually always never usually easy hard simple complicated weak strong long
    short secure insecure required needed missing lost unknown case-sensitive visible
    something nothing anything what which who why how when where if because but and or
    all both either none one two three four five six seven eight nine ten
    digits letters characters numbers
    """.split()
)


def _looks_like_secret(*, value: str, separator: str, quoted: bool) -> bool:
    value = value.rstrip(".,;:!?)]}")
    if len(value) < 3:
        return False
    if quoted:
        return True
    lowered = value.lower()
    if lowered in _NOT_A_SECRET:
        return False
    if separator in {"=", ":", "->"}:
        return True
    if any(character.isdigit() for character in value) or not value.isalpha():
        return True
    # A plain word after "is": an adjective or participle describes the password.
    return not lowered.endswith(("ed", "ing", "ly", "able", "ible"))


def _luhn_ok(digits: str) -> bool:
    total = 0
    for position, character in enumerate(reversed(digits)):
        digit = int(character)
        if position % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


# Issuer prefixes of the big card networks (Visa, Mastercard, Amex, Discover,
# JCB, Diners, UnionPay): limiting to them keeps long order numbers and phone
# numbers with country codes from being refused just because they pass Luhn.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)|3[47]|6011|64[4-9]|65|35|3[0689]|62)")
_CARD_CANDIDATE = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")


def _card_numbers(text: str) -> bool:
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and _luhn_ok(digits):
            return True
    return False


def find_credentials(text: str) -> list[CredentialFinding]:
    """Every kind of secret found in the text (empty list: nothing to refuse)."""
    findings: list[CredentialFinding] = []
    for kind, pattern in _TOKEN_PATTERNS:
        if pattern.search(text):
            findings.append(CredentialFinding(kind))
    for match in _LABELLED_SECRET.finditer(text):
        if _looks_like_secret(
            value=match.group("value"),
            separator=match.group("sep").lower(),
            quoted=bool(match.group("quote")),
        ):
            findings.append(CredentialFinding("a password or key"))
            break
    if _card_numbers(text):
        findings.append(CredentialFinding("a payment card number"))
    return findings


SECRET_STORE_MESSAGE = (
    "Keepsake is not a secret store: this looks like {what}. Keep it in a password manager "
    "and save the memory without it."
)


def refuse_credentials(*, title: str = "", body: str = "") -> None:
    """Raise a ValidationError naming the field and what was found; never echo the secret."""
    errors: dict[str, str] = {}
    for field, text in (("title", title), ("body", body)):
        findings = find_credentials(text)
        if findings:
            kinds = list(dict.fromkeys(finding.kind for finding in findings))
            errors[field] = SECRET_STORE_MESSAGE.format(what=" and ".join(kinds))
    if errors:
        raise ValidationError(errors)
