"""Chat replies as sanitised Markdown, with numbered citations linked for whoever reads them.

`{% load chat_tags %}{% reply_html message %}` in the owner's agent chat: every cited
memory is the owner's, so each [n] links to its page.

`{% reply_html message circle=circle citable=citable %}` in a circle's chat: [n] links
only when the reader may open that memory now (`citable`, from the circles' gate), to
the owner's own page for their own memories and to the circle's page for the others'.
"""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString

from agents.markdown import Citation
from agents.markdown import reply_html as render_reply

register = template.Library()


def _citations(message, *, reader_id: int, circle=None, citable=None) -> dict[int, Citation]:
    cited = getattr(message, "citations", None)
    if cited is None:
        return {}
    citations = {}
    for number, memory in enumerate(cited, start=1):
        if circle is None:
            url = reverse("memory_detail", args=[memory.pk]) if memory.owner_id == reader_id else None
            title = memory.headline
        elif citable is not None and memory.pk in citable:
            url = (
                reverse("memory_detail", args=[memory.pk])
                if memory.owner_id == reader_id
                else reverse("circle_memory_detail", args=[circle.pk, memory.pk])
            )
            title = f"{memory.owner.get_username()}, {memory.occurred_at:%-d %b %Y}"
        else:
            url, title = None, "No longer shown to you in this circle"
        citations[number] = Citation(number=number, url=url, title=title)
    return citations


@register.simple_tag(takes_context=True)
def reply_html(context: template.Context, message, circle=None, citable=None) -> SafeString:
    reader_id = context["request"].user.pk
    return render_reply(
        message.content, _citations(message, reader_id=reader_id, circle=circle, citable=citable)
    )
