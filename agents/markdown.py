"""Agent replies as safe HTML: Markdown by markdown-it-py, then sanitised by nh3.

A reply is text a language model wrote, so it is treated as hostile: raw HTML is
not parsed (it comes out escaped), images are not rendered at all (an image URL
would be fetched by the reader's browser the moment the reply shows, which could
carry what the model read to a stranger's server), and the HTML that comes out is
cleaned again by nh3 (ammonia) against a short allowlist, so a parser bug alone
cannot let a script or an event handler through.

Citations: the prompt numbers the memories [1], [2], … (agents/prompt.py) and the
model cites those numbers. Each `[n]` (or `[1, 3]`) in running text becomes a
link to the memory when the reader may open it, or a plain marker when not;
numbers the reply was not given stay as the model wrote them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

CITATION = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "span",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "span": {"class", "title"},
    "ol": {"start"},
    "code": {"class"},
    "th": {"align"},
    "td": {"align"},
}


@dataclass(frozen=True)
class Citation:
    """What `[number]` points at: a URL the reader may open, or None (named, not linked)."""

    number: int
    url: str | None
    title: str


def _citation(number: int, citation: Citation) -> Token:
    token = Token("citation", "", 0)
    token.meta = {"number": number, "citation": citation}
    return token


def _link_citations(state: StateCore) -> None:
    citations: Mapping[int, Citation] = state.env.get("citations") or {}
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for token in block.children:
            if token.type == "link_open":
                in_link += 1
            elif token.type == "link_close":
                in_link -= 1
            if token.type != "text" or in_link or not CITATION.search(token.content):
                children.append(token)
                continue
            position = 0
            for match in CITATION.finditer(token.content):
                numbers = [int(number) for number in match.group(1).split(",")]
                if not all(number in citations for number in numbers):
                    continue  # not a citation of this reply: the model's text, as written
                if match.start() > position:
                    children.append(_text(token.content[position : match.start()]))
                for number in numbers:
                    children.append(_citation(number, citations[number]))
                position = match.end()
            if position < len(token.content):
                children.append(_text(token.content[position:]))
        block.children = children


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _render_citation(self, tokens, idx, options, env) -> str:
    meta = tokens[idx].meta
    citation: Citation = meta["citation"]
    label = f"[{meta['number']}]"
    if citation.url:
        return (
            f'<a class="citation" href="{escape(citation.url)}" title="{escape(citation.title)}">'
            f"{escape(label)}</a>"
        )
    return f'<span class="citation citation-hidden" title="{escape(citation.title)}">{escape(label)}</span>'


def _render_heading_open(self, tokens, idx, options, env) -> str:
    # The page has its h1 and the chat its own sections: a reply's "# Title" is a
    # sub-heading inside one message, never a page heading.
    level = min(int(tokens[idx].tag[1]) + 2, 6)
    return f"<h{level}>"


def _render_heading_close(self, tokens, idx, options, env) -> str:
    level = min(int(tokens[idx].tag[1]) + 2, 6)
    return f"</h{level}>\n"


def _parser() -> MarkdownIt:
    # "js-default": CommonMark plus tables and strikethrough, with raw HTML off.
    parser = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False})
    parser.disable("image")
    parser.core.ruler.after("text_join", "citations", _link_citations)
    parser.add_render_rule("citation", _render_citation)
    parser.add_render_rule("heading_open", _render_heading_open)
    parser.add_render_rule("heading_close", _render_heading_close)
    return parser


PARSER = _parser()


def reply_html(text: str, citations: Mapping[int, Citation] | None = None) -> SafeString:
    """`text` (Markdown) as sanitised HTML, with `[n]` linked through `citations`."""
    html = PARSER.render(text or "", {"citations": dict(citations or {})})
    cleaned = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(cleaned)  # nh3 has just cleaned it against the allowlist
