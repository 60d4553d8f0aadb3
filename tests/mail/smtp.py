"""A real SMTP server for the tests (aiosmtpd), on a free port, collecting what it receives.

`SmtpServer.refuse_next(n)` makes it answer the next n messages' DATA with 451 (try
again later), as a busy or greylisting server does: the sender must retry.
"""

from __future__ import annotations

import email
import re
import socket
import threading
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller

LINK = re.compile(r"https?://[^\s<>\"']+")


@dataclass
class Received:
    """One message as the server received it: envelope recipient and the parsed message."""

    to: str
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def text(self) -> str:
        return self.message.get_body(preferencelist=("plain",)).get_content()

    @property
    def html(self) -> str:
        part = self.message.get_body(preferencelist=("html",))
        return part.get_content() if part is not None else ""

    @property
    def whole(self) -> str:
        """Subject, text and HTML together: what a privacy check must search."""
        return "\n".join((self.subject, self.text, self.html))

    def links(self) -> list[str]:
        return LINK.findall(self.text)


class _Handler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_DATA(self, smtp_server, session, envelope) -> str:
        with self.server.lock:
            self.server.attempts += 1
            if self.server.refusals > 0:
                self.server.refusals -= 1
                return "451 4.3.0 Try again later"
            message = email.message_from_bytes(envelope.original_content, policy=policy.default)
            for recipient in envelope.rcpt_tos:
                self.server.messages.append(Received(to=recipient, message=message))
        return "250 Message accepted for delivery"


class SmtpServer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[Received] = []
        self.refusals = 0
        self.attempts = 0
        with socket.socket() as probe:  # a free port (the Controller needs a real one to check it is up)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    def refuse_next(self, count: int) -> None:
        with self.lock:
            self.refusals = count

    def clear(self) -> None:
        with self.lock:
            self.messages.clear()
            self.attempts = 0

    def to(self, address: str) -> list[Received]:
        with self.lock:
            return [received for received in self.messages if received.to.lower() == address.lower()]
