"""Rule-based sensitivity classifier and credential detector.

Two different jobs:

* `classify_sensitivity` proposes a sensitivity when the owner gave none: text
  touching health, mental health, sex life, sexuality, religion, politics,
  money, trouble at work, a relationship breaking down, abuse, legal trouble,
  something told in confidence or credentials is `sensitive`, everything else
  `personal`. It never proposes `public`, and an explicit choice by the owner
  always wins. Every path that saves a memory (web form, API, import) infers
  through memories.lifecycle.memory_resolve_kind_and_sensitivity, which calls it.

  It matches whole words and phrases, never substrings ("therapist" is not found
  in "the rapist", "sex" not in "Essex"). Words with an everyday meaning are
  matched only in the phrases that carry the sensitive one: "got fired" and
  "fired me" but not "fired up"; "broke up with" but not "the meeting broke up";
  "came out as" but not "the cake came out". Where that is not possible it
  over-marks on purpose ("a church fete", "the doctor's surgery"): a memory
  wrongly marked sensitive costs a click, one wrongly left personal can be shown
  too widely. benchmarks/data/sensitivity_labelled.jsonl is the labelled list it is
  measured on (`manage.py bench_sensitivity`).

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
    """Whole words or phrases, case-insensitive; `(?-i:...)` inside keeps an acronym's case."""
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


_POSSESSIVE = r"(?:my|his|her|their|our|your)"
_BODY_PART = r"(?:arm|leg|wrist|ankle|hip|rib|nose|toe|finger|collarbone|foot|hand|jaw|elbow|shoulder)s?"
# An amount of money: "£500", "$2,000", "40k", "500 quid", "two thousand pounds".
_AMOUNT = (
    r"(?:[£$€]\s?\d[\d,.]*k?|\d[\d,.]*\s?(?:k|grand|quid|bucks|dollars|pounds|euros)"
    r"|(?:a|one|two|three|four|five|ten|twenty|fifty|a few|several) (?:hundred|thousand|grand)"
    r"(?: pounds| dollars| euros)?)"
)

SENSITIVE_CATEGORIES: dict[str, re.Pattern[str]] = {
    "health": _any(
        r"health ?(?:check|check-?up|scare|problems?|issues?|condition)s?",
        r"check-?ups?",
        r"diagnos\w*",
        r"doctors?(?!\s+(?-i:Who)\b)",
        r"doctor's",
        r"(?-i:GPs?)",
        r"(?-i:A&E)",
        r"urgent care",
        r"emergency room",
        r"ambulance",
        r"paramedics?",
        r"hospitals?",
        r"hospitali[sz]\w*",
        r"hospice",
        r"palliative",
        r"intensive care",
        r"(?-i:N?ICU)",
        r"surgery",
        r"surgeons?",
        r"(?:an|had|having|has|" + _POSSESSIVE + r"|knee|hip|heart|back|eye|bowel|cataract) operation",
        r"cancer",
        r"tumou?rs?",
        r"chemo\w*",
        r"radiotherapy",
        r"biops(?:y|ies)",
        r"found a lump",
        r"a lump (?:in|on)",
        r"diabet\w*",
        r"insulin",
        r"(?-i:HIV)",
        r"pregnan\w*",
        r"expecting (?:a baby|twins|our first|their first)",
        r"miscarr\w*",
        r"abortion",
        r"(?-i:IVF)",
        r"fertility",
        r"infertil\w*",
        r"contracepti\w*",
        r"morning sickness",
        r"midwife",
        r"gyn(?:a)?ecolog\w*",
        r"obstetric\w*",
        r"ultrasound",
        r"born premature\w*",
        r"premature (?:baby|birth)",
        r"prescri\w*",
        r"medications?",
        r"meds",
        r"statins?",
        r"antibiotics",
        r"painkillers?",
        r"ibuprofen",
        r"paracetamol",
        r"morphine",
        r"inhalers?",
        r"vaccin\w*",
        r"(?:flu|covid|booster|tetanus) (?:jab|shot)s?",
        r"(?:sleeping|pain|birth[- ]control|contraceptive) pills?",
        r"on the pill",
        r"the new pill",
        r"(?-i:HRT)",
        r"hormone (?:therapy|treatment|replacement)",
        r"(?:starting|started|start|on) hormones",
        r"symptoms?",
        r"blood (?:pressure|tests?|results|sugar|work|transfusion)",
        r"cholesterol",
        r"(?:test|lab|scan|biopsy) results",
        r"(?:MRI|CT|PET|brain|bone|heart) scans?",
        r"(?-i:MRI)",
        r"x-?rays?",
        r"allerg\w*",
        r"anaphyla\w*",
        r"asthma",
        r"migraines?",
        r"illness(?:es)?",
        r"ill(?!-)",
        r"unwell",
        r"poorly",
        r"diseases?",
        r"infections?",
        r"injur\w*",
        r"fractur\w*",
        r"broken " + _BODY_PART,
        r"broke (?:" + _POSSESSIVE + r"|a) " + _BODY_PART,
        r"concussion",
        r"stitches",
        r"sprain\w*",
        r"physio\w*",
        r"osteopath\w*",
        r"chiropract\w*",
        r"clinic",
        r"dentist",
        r"dental",
        r"root canal",
        r"wisdom tee?th",
        r"toothache",
        r"covid",
        r"tested positive",
        r"dementia",
        r"alzheimer'?s",
        r"parkinson'?s",
        r"multiple sclerosis",
        r"epilep\w*",
        r"seizures?",
        r"arthritis",
        r"autis\w*",
        r"dyslexi\w*",
        r"chronic (?:pain|fatigue|illness)",
        r"stroke(?! of)",
        r"heart (?:attack|condition|problems?|failure|surgery)",
        r"cardiolog\w*",
        r"oncolog\w*",
        r"neurolog\w*",
        r"dermatolog\w*",
        r"sick(?! of| and tired)",
        r"sickness",
        r"off sick",
        r"sick (?:leave|note)",
        r"signed off",
        r"fever",
        r"flu",
        r"nausea",
        r"vomit\w*",
        r"threw up",
        r"throwing up",
        r"cough(?!ed up)\w*",
        r"caught (?:a |the )?(?:cold|bug|virus|flu|covid)",
        r"menopaus\w*",
        r"menstrua\w*",
        r"endometriosis",
        r"(?-i:PCOS)",
        r"disabilit\w*",
        r"disabled",
        r"wheelchair",
        r"crutches",
        r"hearing aids?",
        r"(?:knee|hip|joint|heart valve) replacement",
        r"lost (?:the|our|a|her|their) baby",
        r"on oxygen",
    ),
    "mental_health": _any(
        r"mental (?:health|illness|breakdown)",
        r"(?:nervous|emotional) breakdown",
        r"(?:had|having|have) a breakdown",
        r"depress(?:ed|ion|ive|ants?)",
        r"anxiety",
        r"anxious",
        r"panic attacks?",
        r"therapy",
        r"therapists?",
        r"psychiatr\w*",
        r"psycholog\w*",
        r"counsell?ing",
        r"counsell?ors?",
        r"(?-i:CBT)",
        r"suicid\w*",
        r"self[- ]harm\w*",
        r"(?-i:PTSD)",
        r"trauma\w*",
        r"bipolar",
        r"(?-i:ADHD)",
        r"eating disorder",
        r"anorexi\w*",
        r"bulimi\w*",
        r"antidepressants?",
        r"sertraline",
        r"fluoxetine",
        r"citalopram",
        r"prozac",
        r"xanax",
        r"diazepam",
        r"lithium",
        r"burn-?out",
        r"burn(?:ed|t) out",
        r"(?-i:OCD)",
        r"schizophren\w*",
        r"addict\w*",
        r"rehab",
        r"alcoholi\w*",
        r"sober",
        r"sobriety",
        r"relaps\w*",
        r"overdos\w*",
        r"(?:drinking|gambling|drug) (?:problem|habit|addiction)",
        r"(?-i:AA) meetings?",
        r"don't see the point",
        r"want(?:ed)? to die",
    ),
    "sex_life": _any(
        r"sex",
        r"sex life",
        r"sexual(?:ly)?",
        r"(?:slept|sleeping|sleep|sleeps) with (?:him|her|them|someone|somebody|(?-i:[A-Z][a-z]+))",
        r"hook(?:ed|ing)? up with",
        r"hook-?ups?",
        r"one[- ]night stands?",
        r"(?:made|making|make) love",
        r"libido",
        r"erectile",
        r"impoten\w*",
        r"orgasm\w*",
        r"virginity",
        r"(?:still|is|am|was|were) a virgin",
        r"porn\w*",
        r"condoms?",
        r"(?-i:STIs?|STDs?)",
        r"chlamydia",
        r"gonorrh\w*",
        r"herpes",
        r"syphilis",
        r"kinky",
        r"threesome",
        r"open relationship",
        r"sexting",
        r"nudes",
    ),
    "sexuality": _any(
        r"gay",
        r"lesbians?",
        r"bisexual\w*",
        r"homosexual\w*",
        r"asexual\w*",
        r"pansexual\w*",
        r"queer",
        r"LGBT\w*",
        r"trans(?!-)",
        r"transgender",
        r"non-?binary",
        r"(?:came|coming|come|comes) out (?:as|to (?:me|us|everyone|" + _POSSESSIVE + r" \w+))",
        r"in the closet",
        r"closeted",
        r"sexuality",
        r"sexual orientation",
        r"gender (?:identity|dysphoria|transition)",
        r"transition(?:ing|ed)? (?:to (?:male|female|a man|a woman)|medically|socially)",
        r"(?:they|she|he|ze|xe)/(?:them|they|her|him|hir|xem)",
        # Only the pairings that say something: "her boyfriend" does not.
        r"his boyfriend",
        r"her girlfriend",
    ),
    "religion": _any(
        r"church(?!\s+(?:hall|fete|fête|car park|roof|tower|bells?|spire|jumble sale)\b)",
        r"chapel",
        r"mosques?",
        r"synagogues?",
        r"(?:to|at|after|before|from|midnight|sunday|evening|morning) mass",
        r"prayers?",
        r"pray(?:s|ed|ing)? (?:five|three|every|daily|at the|in the|together|the rosary)",
        r"religio\w*",
        r"bible",
        r"qur'?an",
        r"koran",
        r"torah",
        r"ramadan",
        r"eid",
        r"yom kippur",
        r"passover",
        r"rosh hashanah",
        r"baptis\w*",
        r"christening",
        r"bar mitzvah",
        r"bat mitzvah",
        r"convert(?:ed|ing|s)? to (?:islam|judaism|christianity|catholicism|buddhism|hinduism|sikhism)",
        r"atheis\w*",
        r"agnostic",
        r"catholic\w*",
        r"protestants?",
        r"muslims?",
        r"islam\w*",
        r"jewish",
        r"judaism",
        r"christianity",
        r"(?:a|am|is|are|was|were|became|become|devout|practising|practicing|born-again|evangelical)"
        r" christians?",
        r"hindus?",
        r"hinduism",
        r"buddhis\w*",
        r"sikhs?",
        r"sikhism",
        r"mormons?",
        r"jehovah'?s witness\w*",
        r"quakers?",
        r"priests?",
        r"vicar",
        r"rabbi",
        r"imams?",
        r"pastor",
        r"sermons?",
        r"worship\w*",
        r"(?:believ\w+|belief) in god",
        r"(?:" + _POSSESSIVE + r"|lost|losing|the) faith",
        r"spirituality",
        r"hijab",
        r"niqab",
        r"burqa",
        r"kippah",
        r"yarmulke",
        r"kosher",
        r"halal",
    ),
    "politics": _any(
        r"vot(?:e|ed|es|ing) (?:for|against|labour|tory|tories|conservative|green|reform|lib dem|liberal"
        r"|republican|democrat\w*|leave|remain|snp|plaid|trump|biden|harris)",
        r"(?:labour|conservative|green|reform|liberal democrat|lib dem|republican|democratic|communist"
        r"|socialist|tory|libertarian) party",
        r"tor(?:y|ies)",
        r"republicans?",
        r"democrats?",
        r"lib dems?",
        r"(?-i:MAGA)",
        r"brexit\w*",
        r"(?:left|right|far-right|far-left|alt-right)-wing",
        r"far-right",
        r"far-left",
        r"alt-right",
        r"politic(?:s|al|ally|ians?)",
        r"protest\w*",
        r"(?:marched|marching|march) against",
        r"(?:protest|climate|peace|anti-war|women's) march(?:es)?",
        r"demonstrations? (?:against|for)",
        r"activis[mt]\w*",
        r"canvass\w*",
        r"trade unions?",
        r"union (?:rep|member|meeting|membership)s?",
        r"(?:on|went on|going on|go on) strike",
        r"picket\w*",
        r"referendum",
        r"immigra\w*",
    ),
    "finance": _any(
        r"salar(?:y|ies)",
        r"wages?",
        r"pay ?(?:rise|raise|cut|slip|check)s?",
        r"payday",
        r"(?:a|got a|get a|for a) (?:pay )?raise",
        r"debts?",
        r"in the red",
        r"loans?",
        r"(?:re)?mortgag\w*",
        r"bankrupt\w*",
        r"insolven\w*",
        r"bank (?:account|statement|balance|details|loan)s?",
        r"account number",
        r"sort code",
        r"(?-i:IBAN)",
        r"credit (?:score|rating|card|cards|limit|check)",
        r"overdra\w*",
        r"tax (?:return|bill|rebate|debt)s?",
        r"taxes",
        r"(?-i:HMRC|IRS)",
        r"owe[sd]? (?:\w+ ){0,2}?(?:money|" + _AMOUNT + r")",
        r"(?:lent|lend|lending|borrowed|borrow|borrowing) (?:\w+ ){0,3}?" + _AMOUNT,
        r"(?:scammed|conned|swindled) out of",
        r"fraud\w*",
        r"income",
        r"savings",
        r"inheritance",
        r"(?:left|leaves|leaving) (?:\w+ ){0,3}?" + _AMOUNT + r" in (?:" + _POSSESSIVE + r"|the) will",
        r"pensions?",
        r"net worth",
        r"arrears",
        r"repossess\w*",
        r"evict\w*",
        r"foreclos\w*",
        r"invest(?:ed|ing|ments?)",
        r"(?:sold|sell|selling|bought|buy|buying) (?:some |my |our |his |her )?shares",
        r"bitcoin",
        r"crypto\w*",
        r"(?:can't|cannot|couldn't|can not|could not) afford",
        r"behind (?:on|with) (?:the |our |my |his |her |their )?"
        r"(?:rent|bills?|payments?|mortgage|\w+ bills?)",
        r"(?:i'm|we're|he's|she's|they're|am|are|is|was|were|so|flat|completely|totally|stony) broke"
        r"(?! (?:up|down|into|out|in|off|through|away|free|open|even"
        r"|the|a|an|my|his|her|their|our|its|it)\b)",
        r"universal credit",
        r"(?:on|claiming|claim) benefits",
        r"food ?banks?",
        r"jobseeker'?s allowance",
        r"on the dole",
        r"bailiffs?",
        r"debt collectors?",
        r"(?:make|making|made) (?:the )?rent",
        r"food stamps",
        r"money (?:worries|troubles|problems|issues)",
        r"money is tight",
        r"financial (?:trouble|difficult\w*|problems|worries|advi[sc]e\w*)",
        r"finances",
    ),
    "work": _any(
        r"laid off",
        r"lay-?offs?",
        r"made redundant",
        r"redundanc(?:y|ies)",
        r"(?:got|get|gets|getting|been|was|were|is|are|be|being) (?:fired(?! up)|sacked|let go|dismissed)",
        r"fired (?:me|him|her|them|us|you|from|for)",
        r"sacked",
        r"let (?:me|him|her|them|us) go (?:after|because|from|last|this|today|yesterday|on|with)",
        r"(?:unfair )?dismissal",
        r"(?:lost|losing|lose) " + _POSSESSIVE + r" jobs?",
        r"job loss(?:es)?",
        r"unemploy\w*",
        r"out of work",
        r"furlough\w*",
        r"disciplinary",
        r"(?:written|final|verbal) warning",
        r"performance improvement plan",
        r"(?:bad|poor|terrible|awful|negative) (?:performance )?review",
        r"(?-i:PIP)",
        r"grievance",
        r"(?:handed|hand|handing) in " + _POSSESSIVE + r" notice",
        r"resign(?:ed|ing|ation)",
        r"(?:quit|quitting|quits) " + _POSSESSIVE + r" job",
        r"demot\w*",
        r"passed over for (?:a )?promotion",
        r"interviewing elsewhere",
        r"workplace (?:bullying|harassment)",
    ),
    "relationship_breakdown": _any(
        r"divorc\w*",
        r"(?:are|were|is|was|have|'ve|has|had|got|getting|legally) separat(?:ed|ing)",
        r"separating",
        r"(?:trial )?separation",
        r"broke up with",
        r"(?:we|they|(?-i:[A-Z][a-z]+) and (?-i:[A-Z][a-z]+)) (?:just |finally )?broke up",
        r"(?:have|'ve|has|had) broken up",
        r"break-?ups?",
        r"breaking up",
        r"split up with",
        r"(?:we|they|(?-i:[A-Z][a-z]+) and (?-i:[A-Z][a-z]+)) (?:have |'ve |had )?split up",
        r"splitting up",
        r"(?:an|the|her|his|their) affair",
        r"cheat(?:ed|ing|s)? on",
        r"custody",
        r"estranged",
        r"no longer (?:speak|talk)\w*",
        r"dumped (?:me|him|her|them|us)",
        r"(?:got|been|was|were|getting) dumped",
        r"marriage (?:counsell?ing|is over|is in trouble|is falling apart|on the rocks|troubles|problems)",
        r"rocky patch",
    ),
    "abuse": _any(
        r"abus(?:e|es|ed|er|ers|ive)",
        r"assault(?:ed|s|ing)?(?! course)",
        r"(?<!oilseed )rape",
        r"raped",
        r"rapists?",
        r"molest\w*",
        r"harass\w*",
        r"stalk(?:er|ers|ed|ing)",
        r"bull(?:ied|ying)",
        r"coercive control",
        r"domestic (?:abuse|violence)",
        r"violent (?:partner|husband|wife|boyfriend|girlfriend|ex)",
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
        r"sentenced",
        r"criminal (?:record|charges?|case|conviction)",
        r"probation",
        r"parole",
        r"charged with",
        r"deport\w*",
        r"immigration status",
        r"asylum",
        r"refugee status",
        r"undocumented",
        r"visa (?:application|status|refused|denied|interview|expir\w*)",
        r"work permit",
        r"subpoena\w*",
        r"indict\w*",
        r"prison",
        r"jail",
        r"legal action",
        r"tribunal",
        r"restraining order",
        r"drink[- ]driving",
        r"drunk[- ]driving",
        r"(?-i:DUI)",
        r"speeding (?:ticket|fine|case)",
        r"probate",
    ),
    "credentials": re.compile(
        r"\b(?:passwords?|passcodes?|passphrases?|pin (?:code|number)|2fa|two[- ]factor|recovery codes?"
        r"|security questions?|login details|credentials|api keys?|private keys?"
        r"|seed phrase|recovery phrase)\b"
        r"|\b(?-i:PIN)\b",
        re.IGNORECASE,
    ),
    "confidence": _any(
        r"in (?:strict |complete )?confidence",
        r"confided",
        r"confidential\w*",
        r"(?:don't|do not|dont|never) tell (?:anyone|anybody|a soul)",
        r"(?:keep|keeping|kept|keeps) (?:\w+ ){0,3}?(?:a )?secret",
        r"(?:is|was|it's) a secret",
        r"(?:nobody|no one|no-one) (?:else )?knows",
        r"promised not to tell",
        r"between (?:you and me|ourselves)",
        r"off the record",
        r"secretly",
        r"(?:boss|parents|family|wife|husband) (?:doesn't|don't|does not|do not) know",
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
