"""The prompt for one chat turn, built only from what the consent gate let through.

Inputs are the agent's instructions, the privacy instruction, the memories that
memory_search(respect_consent=True) returned, the owner's earlier questions in
this conversation and the new question. Earlier *replies* are deliberately left
out: they quote memories that were visible when they were written, and consent
may have been revoked since. The owner's own questions are theirs to repeat.
Nothing about people the gate withheld goes in: the chat's notice naming them is
added to the owner's copy of the reply after the model has answered.
"""

from __future__ import annotations

from agents.models import Agent
from agents.offline import memory_date, memory_people
from memories.models import Memory


def _memory_block(position: int, memory: Memory) -> str:
    lines = [f"[{position}] {memory_date(memory)}" + (f" — {memory.title}" if memory.title else "")]
    lines.append(memory.body.strip())
    people = memory_people(memory)
    if people:
        lines.append("People: " + ", ".join(people))
    if memory.source_person is not None:
        lines.append(
            "Told by: " + ("you" if memory.source_person.is_self else memory.source_person.display_name)
        )
    return "\n".join(lines)


def chat_prompt(
    *,
    agent: Agent,
    privacy_instruction: str,
    memories: list[Memory],
    earlier_questions: list[str],
    question: str,
) -> list[dict[str, str]]:
    """OpenAI chat messages: one system message with the memories, one user message."""
    if memories:
        memory_text = "\n\n".join(
            _memory_block(position, memory) for position, memory in enumerate(memories, 1)
        )
    else:
        memory_text = "(No memories matched this question.)"
    system = (
        f"You are {agent.name}, an assistant inside Keepsake, the owner's personal memory journal. "
        f"{agent.instructions.strip()}\n\n{privacy_instruction}\n\n"
        "Below are the only memories you may use, numbered. Cite them by number, like [2]. "
        '"You" in a memory means the owner. If they do not answer the question, say so.\n\n'
        f"Memories:\n{memory_text}"
    )
    if earlier_questions:
        system += "\n\nThe owner's earlier questions in this conversation:\n" + "\n".join(
            f"- {text}" for text in earlier_questions
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]
