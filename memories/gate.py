"""THE gate: who may see which memory. Every rule of SPEC §3–§4, and nothing else.

Every surface that shows or hands over a memory, or text made from memories, asks
here; no other module decides visibility. The viewer is a parameter: the owner, an
agent acting for the owner, a circle member, a member's agent, a set of readers.
Everything is decided inside one SQL statement (EXISTS / NOT EXISTS on the people),
never by filtering rows in Python, so `LIMIT k` counts only what passed and a change
of consent shows on the very next query (nothing is kept but built statements and their parts).

The rules, in SPEC order:

1. **The owner** reads their own journal whole (the owner's pages, `memory_scope`
   without `respect_consent`). Nobody else sees another owner's memory but by 2–5.
2. **The owner's agents** (`agent_visible_memories`): a memory of the owner whose
   every participant and whose source ("who told me") has granted consent to the
   `agents` audience (`Person.consent_status`); with nobody in it, the owner's own
   Self stands in (revoking Self hides it; no Self row hides it too); not expired and
   not replaced by a newer memory; and not `sensitive` unless that agent is cleared
   for sensitive memories (`may_read_sensitive`, off by default). A missing person
   row blocks: fail closed.
3. **A circle member** V (`circle_visible_memories(circle, [V])`): a memory shared
   into the circle, whose owner and V are current members, and either V owns it, or
   every participant and the source is granted for `circle:<id>` (Self counts as
   granted) and its sensitivity allows V: `public` yes; `personal` only if V is
   linked to one of its subjects; `sensitive` the same, and only when V reads alone.
   Members see expired and replaced memories, as entries of a shared journal.
   `person_may_see_memory` asks rules 1 and 3 of one memory in every circle it is in
   (who may receive its photos; agents never do).
4. **An agent reading a circle** (`for_agent=True`: a member's agent, A2A, only in a
   circle its owner belongs to that lets members' agents read, `circles_agents_may_read`;
   the circle's agent in a private or the shared conversation): what rule 3 allows, minus
   expired and replaced memories, `sensitive` ones only with the agent's clearance
   and a reply read alone — and **no agent is the owner**: the viewer's own memory
   passes only by rule 2 for that owner *and* its people's consent to the circle.
5. **Several readers** (the circle's shared conversation, `read_by_several`): what
   every one of them may see; nobody reads alone, so never `sensitive`, and the
   owner's own memory needs its people's consent for the circle there too.
6. **What is made from a memory** (a stored reply, a proposal): shown to a reader
   only if every one of its sources is visible to that reader now, by the rule for
   that reader (`derived_text_shown`); a deleted source is never visible. The owner
   reads their own chats whole; insights are the one exception (the generalisation
   checks, agents/proposals.py).

The privacy audit ("who can see this, and why") and the owner's badges are beside it
(memories/gate_explain.py): the audit takes every yes/no from these functions, the badges
are compared with them by the property tests; the maintained counts the search engine reads
(MemoryGate.blocked_count, MemoryShare.blocked_count, kept by database triggers) are
hints that may only narrow its candidates: every candidate still goes through the
SQL here. memories/retrieval.py is the engine that searches inside these scopes.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import BooleanField, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from memories.models import Memory, MemoryParticipant, ParticipantRole, Sensitivity
from people.models import ConsentStatus, Person, circle_audience


def _owner_id(owner: AbstractBaseUser | int) -> int:
    return owner if isinstance(owner, int) else owner.pk


class _Exists(Exists):
    """EXISTS that the ORM resolves once and compiles once, for statements the gate keeps.

    Django resolves a filter's EXISTS against its query again at every compile (a clone
    of the whole nested subquery, every level), which costs more than running most of
    the gate's statements. Once resolved into a query of a model, resolving it into a
    query of the same model whose aliases cannot clash with its own gives the same
    expression, so it is kept as it is; and its SQL, compiled once per database (on a
    private copy: compiling touches the query's alias counts, and a kept statement may
    be compiled by two threads at once), is reused. Any relabelling (the statement used
    inside another, combined with another) works on a copy, which compiles afresh; a
    query of another model, or one whose aliases could clash, gets Django's own
    resolution. The SQL is exactly Django's: tests/memories/test_gate_compile.py compiles
    every variant of the gate, in every use, against Django's own Exists.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._resolved_into = None
        self._sql: dict[str, tuple[str, tuple]] = {}

    def copy(self):
        clone = super().copy()
        clone._sql = {}
        return clone

    def resolve_expression(self, query=None, *args, **kwargs):
        if (
            self._resolved_into is not None
            and query is not None
            and query.model is self._resolved_into
            and query.alias_prefix != self.query.alias_prefix
        ):
            return self
        resolved = super().resolve_expression(query, *args, **kwargs)
        # Into the query it is a condition of: resolving it again into an enclosing
        # query's (Django does so as the subquery it stands in is resolved) changes no
        # alias it was given there.
        resolved._resolved_into = self._resolved_into or getattr(query, "model", None)
        return resolved

    def as_sql(self, compiler, connection, template=None, **extra_context):
        if self._resolved_into is None or template is not None or extra_context:
            return super().as_sql(compiler, connection, template=template, **extra_context)
        compiled = self._sql.get(connection.alias)
        if compiled is None:
            sql, params = Exists.as_sql(self.copy(), compiler, connection)
            compiled = self._sql[connection.alias] = (sql, tuple(params))
        return compiled


class _ExistsPerRow(_Exists):
    """EXISTS that PostgreSQL decides row by row (a subplan probed per memory), never as a join.

    OFFSET 0 keeps the planner from pulling the subquery up into an anti-join
    (it does so with any other EXISTS, LIMIT 1 included). As a join, once the
    statistics said that every person had granted (an owner who has granted
    everyone: nothing to refuse), it chose to gather every ungranted
    participant of the table before the first row, a read of all the
    participants (23 ms at 100,000), and let the search's LIMIT prorate that
    cost as if it were spread over the rows: agents' kNN p50 20 ms where
    probing the participants of the 40 memories it looks at takes 5-6 ms.
    Probed per row, the gate costs what the rows looked at cost, whatever the
    statistics say. Same answer either way: the rows the condition is true for.
    """

    template = "EXISTS(%(subquery)s OFFSET 0)"


def _kept(condition):
    """`condition` with every _Exists in it resolved into a query of memories now, once.

    A part of the gate that many statements share (the consent checks of a circle, of the
    owners' agents, a viewer's membership) is built and resolved once and kept (the caches
    below); every statement built from it takes the same resolved EXISTS (_Exists keeps it as
    it is) and its SQL, compiled once. Building a circle's statement for a new viewer or a
    new circle is then the few conditions around them, not every nested EXISTS again.
    """
    if isinstance(condition, _Exists):
        return condition.resolve_expression(Memory.objects.all().query)
    if isinstance(condition, Q):
        children = (_kept(child) for child in condition.children)
        return Q(*children, _connector=condition.connector, _negated=condition.negated)
    return condition


@functools.lru_cache(maxsize=2)
def _agents_consent_kept(whole_journal: bool) -> tuple:
    """Rule 2's consent checks that are the same for every owner: the participants', the
    source's, and whether the memory has anyone in it (resolved once: _kept)."""
    # Fail closed: a participant blocks unless its person row is positively known
    # to have granted consent. Written as NOT EXISTS(granted person) rather than a
    # JOIN to people filtered on "not granted": with a JOIN, a participant whose
    # person row is missing (FK checks bypassed by raw SQL) would drop out of the
    # join and the memory would show.
    granted_person = Person.objects.filter(pk=OuterRef("person_id"), consent_status=ConsentStatus.GRANTED)
    ungranted_participant = MemoryParticipant.objects.filter(
        ~_Exists(granted_person), memory_id=OuterRef("pk")
    )
    granted_source = Person.objects.filter(
        pk=OuterRef("source_person_id"), consent_status=ConsentStatus.GRANTED
    )
    any_participant = MemoryParticipant.objects.filter(memory_id=OuterRef("pk"))
    participant_check = _Exists if whole_journal else _ExistsPerRow
    return (
        _kept(~participant_check(ungranted_participant)),
        _kept(_Exists(any_participant)),
        _kept(Q(source_person__isnull=True) | _Exists(granted_source)),
    )


def _agents_rules(owner_id: int, *, may_read_sensitive: bool, whole_journal: bool) -> list:
    """The conditions an owner's memory must meet for an agent acting for that owner (SPEC §3).

    Shared by agent_visible_memories and by the circle case when the memory's owner
    is among the readers through an agent: no agent is the owner.
    """
    no_ungranted_participant, any_participant, source_granted = _agents_consent_kept(whole_journal)
    # A memory with nobody in it is the owner's own: Self stands in as its
    # participant, so revoking Self hides it (and a missing Self row does too).
    granted_self = Person.objects.filter(
        owner_id=owner_id, is_self=True, consent_status=ConsentStatus.GRANTED
    )
    rules = [
        no_ungranted_participant,
        # Self first: one probe per statement (an InitPlan) that, granted as it
        # usually is, settles the OR for every row. With the other arm first,
        # PostgreSQL may hash every participant id of the table before the first
        # row (an agent's page of 20 at 110,000 participants: 36 ms instead of ~2).
        _Exists(granted_self) | any_participant,
        source_granted,
        # Now() is the transaction's clock, so every statement in one search agrees.
        Q(expires_at__isnull=True) | Q(expires_at__gt=Now()),
        Q(owner_id=owner_id),
        Q(superseded_by__isnull=True),
    ]
    if not may_read_sensitive:
        # Sensitive memories go to a language model only when the owner cleared the agent for them.
        rules.append(~Q(sensitivity=Sensitivity.SENSITIVE))
    return rules


def agent_visible_memories(
    owner: AbstractBaseUser | int, *, may_read_sensitive: bool = False, whole_journal: bool = False
) -> QuerySet[Memory]:
    """The owner's memories an agent may see. THE consent gate; every agent path uses it.

    `may_read_sensitive`: the agent's clearance for `sensitive` memories (off by
    default: withheld like ungranted ones). `whole_journal`: a plan for reading
    all of them (a count): the participant check may then be planned as a join,
    one pass over the participants, rather than probed memory by memory
    (_ExistsPerRow), which suits a statement that looks at a few rows (a search,
    a page). The same condition either way.
    """
    return _agent_visible_built(_owner_id(owner), may_read_sensitive, whole_journal).all()


# Built statements, kept per process (bounded): building the gate's nested EXISTS in the ORM
# costs 5-20 ms of Python (a circle's statement for a new circle and viewer: 16-20 ms built
# afresh, 6.5-10 ms from kept parts, _kept), and the same viewer asks again and again. A
# QuerySet that is never evaluated holds no rows, only the statement; callers get a fresh copy
# (`.all()`), and everything the gate reads (consent, membership, shares, the clock) is read by
# that statement when it runs, so a kept one answers exactly as a new one would.
_BUILT_KEPT = 512


@functools.lru_cache(maxsize=_BUILT_KEPT)
def _agent_visible_built(owner_id: int, may_read_sensitive: bool, whole_journal: bool) -> QuerySet[Memory]:
    return Memory.objects.filter(
        *_agents_rules(owner_id, may_read_sensitive=may_read_sensitive, whole_journal=whole_journal)
    )


def forget_built() -> None:
    """Drop every kept statement and kept part (tests that compare them with fresh builds)."""
    kept = (_agent_visible_built, _circle_visible_built, _agents_consent_kept, _circle_kept, _viewer_kept)
    for cache in kept:
        cache.cache_clear()


def agent_visible_people(owner: AbstractBaseUser | int) -> QuerySet[Person]:
    """Rule 2 for people: those an owner's agent may know of, who granted consent for agents.

    Anyone else does not exist for an agent: not listed, not found by id or name.
    """
    return Person.objects.filter(owner_id=_owner_id(owner), consent_status=ConsentStatus.GRANTED)


def memory_scope(
    owner: AbstractBaseUser | int, *, respect_consent: bool, may_read_sensitive: bool = False
) -> QuerySet[Memory]:
    """Where a search may look: the gate for agents (with their clearance for
    sensitive memories), the whole journal for its owner."""
    if respect_consent:
        return agent_visible_memories(owner, may_read_sensitive=may_read_sensitive)
    return Memory.objects.filter(owner_id=_owner_id(owner))


# The gate's SQL, compiled once per process: building it in the ORM (nested
# EXISTS, resolved and compiled) costs ~2 ms of Python per statement, more than
# running it, and a hybrid search needs it three times. Without filters the SQL
# is the same for every owner but for the owner's id, so it is compiled with a
# placeholder id and the caller's id is put into the parameters.
# tests/memories/test_retrieval.py compares it with a fresh compile.
_OWNER_PLACEHOLDER = -1_000_000_007
_COMPILED_SCOPES: dict[tuple[bool, bool], tuple[str, tuple]] = {}


def _compiled_scope(
    owner: AbstractBaseUser | int, *, respect_consent: bool, may_read_sensitive: bool = False
) -> tuple[str, list]:
    """memory_scope(owner) as SQL selecting (id, embedding), and its parameters."""
    key = (respect_consent, respect_consent and may_read_sensitive)
    compiled = _COMPILED_SCOPES.get(key)
    if compiled is None:
        scope = memory_scope(_OWNER_PLACEHOLDER, respect_consent=respect_consent, may_read_sensitive=key[1])
        sql, params = scope.order_by().values_list("pk", "embedding").query.sql_with_params()
        compiled = _COMPILED_SCOPES[key] = (sql, tuple(params))
    sql, params = compiled
    owner_id = _owner_id(owner)
    return sql, [owner_id if _is_placeholder(param) else param for param in params]


def _is_placeholder(param: object) -> bool:
    return type(param) is int and param == _OWNER_PLACEHOLDER


# A circle's gate the same way: compiled once per shape (agent or not, read by
# several or not, how many viewers) with placeholder circle and viewers.
_CIRCLE_PLACEHOLDER = uuid.UUID("00000000-0000-4000-8000-00000000c1c1")
_VIEWER_PLACEHOLDER = -1_000_000_100
_COMPILED_CIRCLE_SCOPES: dict[tuple[bool, bool, bool, int], tuple[str, tuple]] = {}


def _compiled_circle_scope(
    circle_id: uuid.UUID | str,
    viewers: list[int],
    *,
    for_agent: bool,
    read_by_several: bool,
    may_read_sensitive: bool = False,
) -> tuple[str, list]:
    """circle_visible_memories(...) as SQL selecting (id, embedding), and its parameters."""
    viewers = sorted(set(viewers))
    may_read_sensitive = for_agent and may_read_sensitive
    key = (for_agent, read_by_several, may_read_sensitive, len(viewers))
    placeholders = [_VIEWER_PLACEHOLDER - index for index in range(len(viewers))]
    compiled = _COMPILED_CIRCLE_SCOPES.get(key)
    if compiled is None:
        scope = circle_visible_memories(
            _CIRCLE_PLACEHOLDER,
            placeholders,
            for_agent=for_agent,
            read_by_several=read_by_several,
            may_read_sensitive=may_read_sensitive,
        )
        sql, params = scope.order_by().values_list("pk", "embedding").query.sql_with_params()
        compiled = _COMPILED_CIRCLE_SCOPES[key] = (sql, tuple(params))
    sql, params = compiled
    circle = uuid.UUID(str(circle_id))
    # The gate sorts its viewers, so the i-th smallest placeholder stands for the i-th smallest viewer.
    swap: dict[object, object] = dict(zip(sorted(placeholders), viewers, strict=True))
    swap |= {
        _CIRCLE_PLACEHOLDER: circle,
        str(_CIRCLE_PLACEHOLDER): str(circle),
        circle_audience(_CIRCLE_PLACEHOLDER): circle_audience(circle),
    }

    def swapped(param: object) -> object:
        if type(param) in (int, str, uuid.UUID) and param in swap:
            return swap[param]
        if isinstance(param, list | tuple):
            return type(param)(swapped(item) for item in param)
        return param

    filled = [swapped(param) for param in params]
    if any(_mentions_placeholder(param) for param in filled):
        # A parameter in a form not swapped above: compile this one afresh.
        scope = circle_visible_memories(
            circle_id,
            viewers,
            for_agent=for_agent,
            read_by_several=read_by_several,
            may_read_sensitive=may_read_sensitive,
        )
        return _scope_sql(scope)
    return sql, filled


def _mentions_placeholder(param: object) -> bool:
    if isinstance(param, list | tuple):
        return any(_mentions_placeholder(item) for item in param)
    if type(param) is int:
        return _VIEWER_PLACEHOLDER - 1_000 < param <= _VIEWER_PLACEHOLDER
    return str(_CIRCLE_PLACEHOLDER) in str(param)


def _scope_sql(scope: QuerySet[Memory]) -> tuple[str, list]:
    """A scope (with filters) compiled now, selecting (id, embedding): the uncached case."""
    sql, params = scope.order_by().values_list("pk", "embedding").query.sql_with_params()
    return sql, list(params)


def _granted_for(audience: str, person_ref: str) -> _Exists:
    """EXISTS the person at `person_ref`, granted for `audience` (Self always is).

    A Self person counts as granted for every circle its owner shares into
    (sharing your own memory is your consent). Written as EXISTS(person ...) so a
    missing person row is not granted: fail closed.
    """
    from people.models import PersonConsent

    consent = PersonConsent.objects.filter(
        person_id=OuterRef("pk"), audience=audience, status=ConsentStatus.GRANTED
    )
    return _Exists(Person.objects.filter(Q(is_self=True) | _Exists(consent), pk=OuterRef(person_ref)))


def circle_consent_blockers(memory: Memory, circle_id: uuid.UUID | str) -> list[tuple[Person, str]]:
    """Rule 3's consent part for one memory, as people: everyone in it (participants and who
    told it) not granted for the circle, with their status, by name. Self counts as granted.

    Sharing asks it before writing a share (refused, naming them, unless it is empty) and
    the privacy audit to explain a "no"; what members see is still decided at read time by
    circle_visible_memories, so a later revocation needs no clean-up.
    """
    from people.models import PersonConsent

    people = {
        person.pk: person
        for person in Person.objects.filter(
            Q(pk__in=memory.participants.values("person_id")) | Q(pk=memory.source_person_id), is_self=False
        )
    }
    statuses = dict(
        PersonConsent.objects.filter(
            person_id__in=list(people), audience=circle_audience(circle_id)
        ).values_list("person_id", "status")
    )
    return [
        (person, statuses.get(person.pk, ConsentStatus.PENDING))
        for person in sorted(
            people.values(), key=lambda person: (person.display_name.lower(), str(person.pk))
        )
        if statuses.get(person.pk) != ConsentStatus.GRANTED
    ]


def circle_visible_memories(
    circle_id: uuid.UUID | str,
    viewer_ids: Iterable[int],
    *,
    for_agent: bool = False,
    read_by_several: bool = False,
    may_read_sensitive: bool = False,
    assume_shared: bool = False,
) -> QuerySet[Memory]:
    """The memories shared into a circle that EVERY viewer in `viewer_ids` may see. THE gate's circle case.

    A member is a set of one; a reply read by several members (the circle's
    agent) passes the set, and the SQL is the intersection. A memory M of owner O
    passes for viewer V iff (SPEC §4):
    - M is shared into the circle, O is still a member of it, and V is a current
      member (membership is read by this very statement: leaving or removal
      takes effect on the next query, nothing cached);
    - V is O reading as a person (the owner always sees their own), or else
      - every participant and the source of M is granted for `circle:<id>`
        (PersonConsent; Self counts as granted; a missing person blocks), and
      - sensitivity allows V: `public` → yes; `personal` → V is linked to a
        subject of M; `sensitive` → the same, and only when V reads alone.
    `for_agent`: an agent reads for these viewers (the circle's agent in any
    conversation, a member's agent reading the circle). No agent is the owner
    (SPEC §3): the owner's own memory then passes only if the owner's agents may
    read it (agent_visible_memories' rules: `agents` consent of everyone in it,
    Self for an untagged one, expiry, supersession) and its people have consented
    to the circle. Expiry and supersession hide memories from agents only:
    members see a shared memory as an entry in a shared journal. An agent reads a
    `sensitive` memory only with `may_read_sensitive` (its clearance), alone.
    `read_by_several`: the reply will be read by more than these viewers (a
    circle's shared conversation, which future members read too), so `sensitive`
    never passes even for a single viewer, and the owner's own memory still needs
    its people's consent for the circle and is never `sensitive` there.
    `assume_shared`: every rule but the share itself, for the owner's question "who
    would see it if I shared it?" (circle_members_who_would_see); never a reader's scope.
    """
    viewers = tuple(sorted({int(viewer_id) for viewer_id in viewer_ids}))
    if not viewers:
        return Memory.objects.none()
    return _circle_visible_built(
        str(circle_id),
        viewers,
        bool(for_agent),
        bool(read_by_several),
        bool(may_read_sensitive),
        bool(assume_shared),
    ).all()


@functools.lru_cache(maxsize=_BUILT_KEPT)
def _circle_visible_built(
    circle_id: str,
    viewers: tuple[int, ...],
    for_agent: bool,
    read_by_several: bool,
    may_read_sensitive: bool,
    assume_shared: bool,
) -> QuerySet[Memory]:
    """circle_visible_memories' statement, built (kept: see _BUILT_KEPT)."""
    shared_into, consented = _circle_kept(circle_id)
    conditions: list = [
        # The owner is still a member: = ANY(ARRAY(...)) reads the members once (an
        # InitPlan) instead of joining every shared memory to every membership.
        RawSQL(
            f"{Memory._meta.db_table}.owner_id = ANY(ARRAY(SELECT user_id FROM "
            f"{_membership_model()._meta.db_table} WHERE circle_id = %s))",
            [str(circle_id)],
            output_field=BooleanField(),
        ),
    ]
    if not assume_shared:
        conditions.insert(0, shared_into)
    alone = len(viewers) == 1 and not read_by_several
    # A person reading alone may read a sensitive memory about them; an agent only when cleared.
    sensitive_passes = alone and (may_read_sensitive or not for_agent)
    if for_agent:
        # Now() is the transaction's clock, as in agent_visible_memories.
        conditions += [Q(expires_at__isnull=True) | Q(expires_at__gt=Now()), Q(superseded_by__isnull=True)]
    if for_agent or read_by_several:
        # Through an agent or for several readers, even the viewer's own memory needs its
        # people's consent for the circle: asked once here, not once per viewer.
        conditions.append(consented)
    for viewer_id in viewers:
        member, about_viewer = _viewer_kept(circle_id, viewer_id)
        allowed = Q(sensitivity=Sensitivity.PUBLIC) | (Q(sensitivity=Sensitivity.PERSONAL) & about_viewer)
        if sensitive_passes:
            allowed |= Q(sensitivity=Sensitivity.SENSITIVE) & about_viewer
        conditions.append(member)
        if for_agent:
            # The viewer's own memory through an agent: the agents' rules for its owner
            # and the circle's consent, never the owner's shortcut (nor `allowed`, which
            # would let a public one past the owner's agents' consent).
            owner_sensitivities = [Sensitivity.PUBLIC, Sensitivity.PERSONAL]
            if sensitive_passes:
                owner_sensitivities.append(Sensitivity.SENSITIVE)
            owner_may = Q(
                *_agents_rules(viewer_id, may_read_sensitive=sensitive_passes, whole_journal=False),
                sensitivity__in=owner_sensitivities,
            )
            conditions.append(owner_may | (~Q(owner_id=viewer_id) & allowed))
        elif read_by_several:
            # A text the circle reads (future members too): its audience is the
            # circle, so the owner's own memory needs its people's consent for the
            # circle and is never sensitive.
            owner_may = Q(owner_id=viewer_id, sensitivity__in=[Sensitivity.PUBLIC, Sensitivity.PERSONAL])
            conditions.append(owner_may | allowed)
        else:
            conditions.append(Q(owner_id=viewer_id) | (consented & allowed))
    return Memory.objects.filter(*conditions)


def _membership_model():
    # circles builds on memories; the gate reads its tables here, lazily, so that
    # there is one gate with a case per audience rather than a second gate there.
    from circles.models import CircleMembership

    return CircleMembership


@functools.lru_cache(maxsize=_BUILT_KEPT)
def _circle_kept(circle_id: str) -> tuple:
    """A circle's parts of rule 3 that are the same for every viewer, resolved once (_kept):
    the memory is shared into it, and its people (participants, who told it) are granted for it."""
    from circles.models import MemoryShare

    audience = circle_audience(circle_id)
    ungranted_participant = MemoryParticipant.objects.filter(
        ~_granted_for(audience, "person_id"), memory_id=OuterRef("pk")
    )
    consented = Q(~_Exists(ungranted_participant)) & (
        Q(source_person__isnull=True) | Q(_granted_for(audience, "source_person_id"))
    )
    shared_into = _Exists(MemoryShare.objects.filter(memory_id=OuterRef("pk"), circle_id=circle_id))
    return _kept(shared_into), _kept(consented)


@functools.lru_cache(maxsize=_BUILT_KEPT)
def _viewer_kept(circle_id: str, viewer_id: int) -> tuple:
    """A viewer's parts of rule 3 in a circle, resolved once (_kept): they are a current
    member, and the memory is about them (a subject linked to them)."""
    member = _Exists(_membership_model().objects.filter(circle_id=circle_id, user_id=viewer_id))
    about_viewer = Q(
        _Exists(
            MemoryParticipant.objects.filter(
                memory_id=OuterRef("pk"), role=ParticipantRole.SUBJECT, person__linked_user_id=viewer_id
            )
        )
    )
    return _kept(member), _kept(about_viewer)


def circles_agents_may_read(owner_id: int) -> QuerySet:
    """Rule 4's door for a member's agent (A2A): the circles its owner belongs to that let
    members' agents read. Read fresh by every call: switching the setting off, or the
    member leaving, shuts the door on the agent's next request."""
    from circles.models import Circle, CircleMembership

    membership = CircleMembership.objects.filter(circle_id=OuterRef("pk"), user_id=owner_id)
    return Circle.objects.filter(_Exists(membership), agents_may_read=True)


def circle_members_who_would_see(
    memory: Memory, circle_id: uuid.UUID | str, member_ids: Iterable[int]
) -> dict[int, bool]:
    """For each member: would they see `memory` in the circle, were it shared there (or as it is shared)?

    The Share panel's prediction, member by member: rule 3 asked for each member alone,
    with the share assumed, so what it says before sharing is what the circle shows after.
    """
    return {
        member_id: circle_visible_memories(circle_id, [member_id], assume_shared=True)
        .filter(pk=memory.pk)
        .exists()
        for member_id in member_ids
    }


def person_may_see_memory(memory_id: uuid.UUID | str, viewer_id: int) -> bool:
    """Rules 1 and 3 for one memory and one person reading alone, wherever it is shared.

    The memory's owner; else a current member of a circle the memory is shared into
    to whom rule 3 shows it there (`circle_visible_memories(circle, [viewer])`). This is
    who may receive a file of the memory (attachments.views). Never an agent: agents
    are given no files at all, so there is no agent case here.
    """
    from circles.models import MemoryShare

    if Memory.objects.filter(pk=memory_id, owner_id=viewer_id).exists():
        return True
    circles = MemoryShare.objects.filter(memory_id=memory_id).values_list("circle_id", flat=True)
    return any(
        circle_visible_memories(circle_id, [viewer_id]).filter(pk=memory_id).exists() for circle_id in circles
    )


def memories_a_decision_covers(person: Person, circle_id: uuid.UUID | str | None = None) -> QuerySet[Memory]:
    """What a person's consent for one audience decides about: the owner's memories they are
    in (as a participant or who told it) and, for a circle, those of them shared into it.

    Counted for the linked person on My consents (a count, never a memory), so they know
    what a grant or a revocation will open or close.
    """
    from circles.models import MemoryShare

    involving = Memory.objects.filter(owner_id=person.owner_id).filter(
        Q(participants__person=person) | Q(source_person=person)
    )
    if circle_id is not None:
        involving = involving.filter(
            _Exists(MemoryShare.objects.filter(memory_id=OuterRef("pk"), circle_id=circle_id))
        )
    return involving.distinct()


# --- 6. what is made from memories ------------------------------------------------------


def circle_sources_visible(
    circle_id: uuid.UUID | str, reader_id: int, sources: Iterable[uuid.UUID]
) -> set[uuid.UUID]:
    """Which of `sources` the reader, a member reading alone, may see in the circle now (rule 3)."""
    sources = set(sources)
    if not sources:
        return set()
    return set(
        circle_visible_memories(circle_id, [reader_id]).filter(pk__in=sources).values_list("pk", flat=True)
    )


def derived_text_shown(sources: Iterable[uuid.UUID], visible: set[uuid.UUID]) -> bool:
    """Rule 6: text made from `sources` is shown only if every one is visible to the reader now.

    `visible`: what the gate says the reader may see among them (circle_sources_visible).
    A deleted source is in no gate's answer, so its text stays hidden for good.
    """
    return visible.issuperset(sources)
