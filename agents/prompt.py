"""The prompt for one chat turn, built only from what the consent gate let through.

Inputs are the agent's instructions, the privacy instruction, the memories that
memory_search(respect_consent=True) returned, the owner's earlier questions in
this conversation and the new question. Earlier *replies* are deliberately left
out: they quote memories that were visible when they were written, and consent
may have been revoked since. The owner's own questions are theirs to repeat.
Nothing about people the gate withheld goes in: the chat's notice naming them is
added to the owner's copy of the reply after the model has answered.

A circle's agent (`asker` given) reads memories from several members' journals:
each memory then says whose it is, by its owner's name, and Self is that name,
never "you" — otherwise a model credits Ana's memory to Ben when Ben asks.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from agents.models import Agent
from agents.offline import memory_date, memory_owner_names, memory_people, person_name
from memories.models import Memory


def _memory_block(position: int, memory: Memory, *, owner_name: str | None, askers: bool) -> str:
    lines = [f"[{position}] {memory_date(memory)}" + (f" — {memory.title}" if memory.title else "")]
    if owner_name is not None:
        lines.append(f"Whose: {owner_name}'s memory" + (" (the member asking)" if askers else ""))
    lines.append(memory.body.strip())
    people = memory_people(memory, owner_name=owner_name)
    if people:
        lines.append("People: " + ", ".join(people))
    if memory.source_person is not None:
        lines.append("Told by: " + person_name(memory.source_person, owner_name=owner_name))
    return "\n".join(lines)


def chat_prompt(
    *,
    agent: Agent,
    privacy_instruction: str,
    memories: list[Memory],
    earlier_questions: list[str],
    question: str,
    asker: AbstractBaseUser | None = None,
) -> list[dict[str, str]]:
    """OpenAI chat messages: one system message with the memories, one user message.

    `asker` is the circle member asking a circle's agent; None in the owner's own chat.
    """
    owner_names = memory_owner_names(memories) if asker is not None else {}
    asker_name = asker.get_username() if asker is not None else None
    if memories:
        memory_text = "\n\n".join(
            _memory_block(
                position,
                memory,
                owner_name=owner_names.get(memory.owner_id),
                askers=asker is not None and memory.owner_id == asker.pk,
            )
            for position, memory in enumerate(memories, 1)
        )
    else:
        memory_text = "(No memories matched this question.)"
    if asker is None:
        journal = "the owner's personal memory journal"
        whose = '"You" in a memory means the owner.'
    else:
        journal = "a memory journal whose members share memories in a circle"
        whose = (
            f'Each memory is one member\'s, named on its "Whose" line: credit it to that member by name. '
            '"I" and "me" in a memory mean that member. '
            f"{asker_name} is asking: call a memory theirs only if it is {asker_name}'s memory."
        )
    system = (
        f"You are {agent.name}, an assistant inside Keepsake, {journal}. "
        f"{agent.instructions.strip()}\n\n{privacy_instruction}\n\n"
        "Below are the only memories you may use, numbered. Cite them by number, like [2]. "
        f"{whose} If they do not answer the question, say so.\n\n"
        f"Memories:\n{memory_text}"
    )
    if earlier_questions:
        system += "\n\nThe owner's earlier questions in this conversation:\n" + "\n".join(
            f"- {text}" for text in earlier_questions
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]
