from __future__ import annotations

from datetime import date, datetime, timedelta

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from config.limits import (
    MEMORY_BODY_MAX_LENGTH,
    MEMORY_TITLE_MAX_LENGTH,
    TOO_FAR_IN_THE_FUTURE,
    date_too_far,
)
from memories.dates import occurred_day, occurred_has_time, occurred_moment
from memories.lifecycle import kind_lifetimes
from memories.models import Memory, MemoryKind, ParticipantRole, Sensitivity
from memories.selectors import memory_list
from people.models import Person
from people.selectors import person_list, person_name_taken

# A date and a time in one value (older forms, scripts): the time is kept.
MOMENT_INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
DATE_INVALID = "Enter a date, e.g. 2024-05-01."


class WhenDateField(forms.DateField):
    """The day of a memory (<input type=date>, shown in the browser's own date format).

    A value with a time as well ("2024-05-01T14:30") is taken whole, as a naive datetime.
    """

    widget = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
    default_error_messages = {"invalid": DATE_INVALID}

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, date):  # a datetime too
            return value
        text = str(value).strip()
        for moment_format in MOMENT_INPUT_FORMATS:
            try:
                return datetime.strptime(text, moment_format)
            except ValueError:
                continue
        return super().to_python(value)


def _owner_people(owner: AbstractBaseUser):
    # Choices are always the owner's own people: an id from another account
    # is "not one of the available choices", never a hint that it exists.
    return person_list(owner=owner)


WORK_IT_OUT = ""


def _kind_label(label: str, lifetime: timedelta | None) -> str:
    if lifetime is None:
        return label
    days = lifetime / timedelta(days=1)
    return f"{label} ({days:g} day{'' if days == 1 else 's'})"


class MemoryForm(forms.Form):
    title = forms.CharField(max_length=MEMORY_TITLE_MAX_LENGTH, required=False)
    body = forms.CharField(
        max_length=MEMORY_BODY_MAX_LENGTH,
        label="What happened?",
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "What happened? Mention people with @, e.g. Lunch with @Anna"}
        ),
        error_messages={"required": "Write something: a memory needs a body."},
    )
    occurred_at = WhenDateField(label="Date", required=False, help_text="Empty: now.")
    occurred_time = forms.TimeField(
        label="Time",
        required=False,
        input_formats=["%H:%M", "%H:%M:%S"],
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        help_text="Empty: the whole day.",
        error_messages={"invalid": "Enter a time, e.g. 14:30."},
    )
    # "" = let memories.lifecycle / memories.classify decide from the text; an explicit choice wins.
    kind = forms.ChoiceField(choices=[(WORK_IT_OUT, "Work it out"), *MemoryKind.choices], required=False)
    sensitivity = forms.ChoiceField(
        choices=[(WORK_IT_OUT, "Work it out"), *Sensitivity.choices], required=False
    )
    source_person = forms.ModelChoiceField(
        queryset=Person.objects.none(),
        required=False,
        label="Who told you",
        empty_label="I saw it myself",
    )

    # Shown once under the kind and sensitivity pickers (too long for a narrow column each).
    work_it_out_help = (
        "“Work it out” guesses from your words: “remind me” makes a task, “loves” a preference, "
        "“went to” an event, otherwise knowledge; health, money, trouble at work, sex, sexuality, "
        "religion, politics, legal matters, a break-up, a confidence or passwords make it sensitive. "
        "Your own choice wins. Kinds with days leave your agents' "
        "view that long after the memory's date; you keep them."
    )

    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # "I saw it myself" is the owner: their Self would say it a second time.
        self.fields["source_person"].queryset = _owner_people(owner).filter(is_self=False)
        # Short-lived kinds say how long agents may use them (settings.MEMORY_KIND_LIFETIMES).
        for name in ("kind", "sensitivity"):
            self.fields[name].widget.attrs["aria-describedby"] = "work-it-out-help"
        lifetimes = kind_lifetimes()
        self.fields["kind"].choices = [
            (WORK_IT_OUT, "Work it out"),
            *((kind, _kind_label(label, lifetimes[kind])) for kind, label in MemoryKind.choices),
        ]

    def clean_kind(self) -> str | None:
        return self.cleaned_data.get("kind") or None

    def clean_sensitivity(self) -> str | None:
        return self.cleaned_data.get("sensitivity") or None

    def clean_body(self) -> str:
        body = self.cleaned_data["body"].strip()
        if not body:
            raise forms.ValidationError("Write something: a memory needs a body.")
        return body

    def clean(self) -> dict:
        cleaned = super().clean()
        if "occurred_at" in self.errors or "occurred_time" in self.errors:
            return cleaned
        day, at = cleaned.get("occurred_at"), cleaned.get("occurred_time")
        if isinstance(day, datetime):
            moment = timezone.make_aware(datetime.combine(day.date(), at or day.time()))
        elif day is not None:
            moment = occurred_moment(day, at) if at is not None else occurred_day(day)
        elif at is not None:
            moment = occurred_moment(timezone.localdate(), at)
        else:
            moment = timezone.now()
        if date_too_far(moment):
            self.add_error("occurred_at", TOO_FAR_IN_THE_FUTURE)
        cleaned["occurred_at"] = moment
        return cleaned

    @classmethod
    def initial_for(cls, memory: Memory) -> dict:
        local = timezone.localtime(memory.occurred_at)
        return {
            "title": memory.title,
            "body": memory.body,
            "occurred_at": local.date(),
            "occurred_time": local.time() if occurred_has_time(memory.occurred_at) else None,
            "kind": memory.kind,
            "sensitivity": memory.sensitivity,
            "source_person": None
            if memory.source_person_id and memory.source_person.is_self
            else memory.source_person_id,
        }


class ParticipantForm(forms.Form):
    """One row: pick an existing person or type a new name, and a role."""

    person = forms.ModelChoiceField(queryset=Person.objects.none(), required=False, empty_label="— person —")
    new_name = forms.CharField(
        max_length=200,
        required=False,
        label="or a new person",
        widget=forms.TextInput(attrs={"placeholder": "New name"}),
    )
    role = forms.ChoiceField(choices=ParticipantRole.choices, initial=ParticipantRole.SUBJECT)

    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.fields["person"].queryset = _owner_people(owner)

    def clean_new_name(self) -> str:
        return " ".join(self.cleaned_data.get("new_name", "").split())

    def clean(self) -> dict:
        cleaned = super().clean()
        person, new_name = cleaned.get("person"), cleaned.get("new_name")
        if person and new_name:
            raise forms.ValidationError("Pick someone or type a new name, not both.")
        if new_name and person_name_taken(owner=self.owner, display_name=new_name):
            raise forms.ValidationError(
                f"You already have someone called “{new_name}”: pick them from the list instead."
            )
        return cleaned

    @property
    def is_blank(self) -> bool:
        return not (self.cleaned_data.get("person") or self.cleaned_data.get("new_name"))


class BaseParticipantFormSet(forms.BaseFormSet):
    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        self.owner = owner
        super().__init__(*args, **kwargs)

    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "owner": self.owner}

    def clean(self) -> None:
        if any(self.errors):
            return
        if self.management_form.cleaned_data.get("TOTAL_FORMS", 0) < 0:
            # Django builds no forms for a negative count: the people would be dropped silently.
            raise forms.ValidationError("The list of people was sent damaged; reload the page and try again.")
        seen_people: set = set()
        seen_names: set[str] = set()
        for form in self.forms:
            person, new_name = form.cleaned_data.get("person"), form.cleaned_data.get("new_name")
            if person:
                if person.pk in seen_people:
                    raise forms.ValidationError(f"{person.display_name} is listed more than once.")
                seen_people.add(person.pk)
            if new_name:
                if new_name.casefold() in seen_names:
                    raise forms.ValidationError(f"“{new_name}” is listed more than once.")
                seen_names.add(new_name.casefold())

    def chosen(self) -> tuple[list[tuple[Person, str]], list[tuple[str, str]]]:
        """(existing person, role) pairs and (new name, role) pairs, blank rows skipped."""
        existing: list[tuple[Person, str]] = []
        new: list[tuple[str, str]] = []
        for form in self.forms:
            if not form.cleaned_data or form.is_blank:
                continue
            if form.cleaned_data.get("person"):
                existing.append((form.cleaned_data["person"], form.cleaned_data["role"]))
            else:
                new.append((form.cleaned_data["new_name"], form.cleaned_data["role"]))
        return existing, new


PARTICIPANT_MAX_ROWS = 20

# absolute_max: a forged TOTAL_FORMS of 99999999 builds at most this many forms (Django's
# default would build 1 000 more) and, with validate_max, is a form error.
ParticipantFormSet = forms.formset_factory(
    ParticipantForm,
    formset=BaseParticipantFormSet,
    extra=3,
    max_num=PARTICIPANT_MAX_ROWS,
    absolute_max=PARTICIPANT_MAX_ROWS,
    validate_max=True,
)

PARTICIPANT_PREFIX = "people"
# The name of the "+ Add another person" submit button (the round trip without JavaScript).
ADD_ROW = "add_person_row"


def participant_row_form(*, owner: AbstractBaseUser, index: int) -> ParticipantForm:
    """One more empty people row, numbered to extend the formset already on the page."""
    return ParticipantForm(
        prefix=f"{PARTICIPANT_PREFIX}-{index}",
        owner=owner,
        empty_permitted=True,
        use_required_attribute=False,
    )


def participant_formset(
    *, owner: AbstractBaseUser, data=None, memory: Memory | None = None
) -> BaseParticipantFormSet:
    initial = None
    if memory is not None and data is None:
        initial = [
            {"person": participant.person_id, "role": participant.role}
            for participant in memory.participants.all()
        ]
    # Editing shows the current people plus the empty rows to add someone.
    return ParticipantFormSet(data=data, initial=initial, prefix=PARTICIPANT_PREFIX, owner=owner)


def participant_formset_plus_row(*, owner: AbstractBaseUser, data) -> BaseParticipantFormSet:
    """ "+ Add another person" without JavaScript: the rows as sent, plus one empty row.

    Unbound (what was typed is the rows' initial values), so nothing is validated or
    flagged yet. The count sent is trusted only within 0..PARTICIPANT_MAX_ROWS.
    """
    try:
        sent = int(data.get(f"{PARTICIPANT_PREFIX}-TOTAL_FORMS", ""))
    except ValueError:
        sent = 0
    sent = max(0, min(sent, PARTICIPANT_MAX_ROWS))
    rows = [
        {
            "person": data.get(f"{PARTICIPANT_PREFIX}-{index}-person", ""),
            "new_name": data.get(f"{PARTICIPANT_PREFIX}-{index}-new_name", ""),
            "role": data.get(f"{PARTICIPANT_PREFIX}-{index}-role", ParticipantRole.SUBJECT),
        }
        for index in range(sent)
    ]
    formset = ParticipantFormSet(initial=rows, prefix=PARTICIPANT_PREFIX, owner=owner)
    formset.extra = 1 if sent < PARTICIPANT_MAX_ROWS else 0
    return formset


class TimelineFilterForm(forms.Form):
    person = forms.ModelChoiceField(queryset=Person.objects.none(), required=False, empty_label="Anyone")
    kind = forms.ChoiceField(choices=[("", "Any kind"), *MemoryKind.choices], required=False)
    date_from = forms.DateField(
        required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
    )
    date_to = forms.DateField(
        required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
    )
    expired = forms.ChoiceField(
        choices=[("", "All"), ("live", "Live"), ("expired", "Expired")], required=False, label="Expiry"
    )

    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        # Its own ids: the quick-add form on the same page has a "kind" too.
        kwargs.setdefault("auto_id", "filter_%s")
        super().__init__(*args, **kwargs)
        self.fields["person"].queryset = _owner_people(owner)

    def clean_expired(self) -> bool | None:
        # MemoryFilters.expired: None = both, False = only live, True = only expired.
        return {"": None, "live": False, "expired": True}[self.cleaned_data.get("expired", "")]

    def clean(self) -> dict:
        cleaned = super().clean()
        date_from, date_to = cleaned.get("date_from"), cleaned.get("date_to")
        if date_from and date_to and date_from > date_to:
            raise forms.ValidationError("The “from” date must be on or before the “to” date.")
        return cleaned


SEARCH_MAX_LENGTH = 200


def _option_label(memory: Memory) -> str:
    headline = memory.headline
    if len(headline) > 70:
        headline = headline[:69] + "…"
    return f"{timezone.localtime(memory.occurred_at):%d %b %Y} · {headline}"


class SupersedeForm(forms.Form):
    """ "This memory replaces an older one": pick it from a short list of candidates."""

    older = forms.ModelChoiceField(
        queryset=Memory.objects.none(),
        label="Older memory it replaces",
        empty_label="— pick the older memory —",
        error_messages={
            "required": "Pick the older memory this one replaces.",
            "invalid_choice": "Pick one of your memories from the list.",
        },
    )
    # Carried along so a refused link re-shows the same narrowed list.
    q = forms.CharField(required=False, widget=forms.HiddenInput, max_length=SEARCH_MAX_LENGTH)

    def __init__(self, *args, owner: AbstractBaseUser, options: list[Memory], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["older"]
        # Any of the owner's memories is accepted (the service explains a refusal
        # better than "not a valid choice"); the list shows only those it would accept.
        field.queryset = memory_list(owner=owner)
        field.widget.choices = [("", field.empty_label), *((m.pk, _option_label(m)) for m in options)]
        self.has_options = bool(options)


class UnsupersedeForm(forms.Form):
    """Undo "replaced by": which memory of the chain is no longer replaced."""

    replaced = forms.UUIDField()
