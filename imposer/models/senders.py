"""Who sent a message: SQS's ``SenderId``, and the entries that bind a sender to a tenant.

SQS stamps every message with the principal that sent it, which the sender
cannot choose: an IAM user's unique id (``AIDA...``), or for a role session
the role's unique id and the session name (``AROA...:i-0abc``); the account
id for the root user. STS ``GetCallerIdentity`` returns the same string as
``UserId``. An entry binds exactly that sender, or, given as a role id alone,
every session of the role.
"""

from __future__ import annotations

import re
from typing import Iterable

#: A unique id (user, role or account), optionally with a role session name.
SENDER_PATTERN = re.compile(r"[A-Za-z0-9]{1,128}(:[\w+=,.@-]{1,128})?")


def valid_sender(entry: str) -> bool:
    """Say whether *entry* can bind a sender (an id, or a role id with one session)."""
    return SENDER_PATTERN.fullmatch(entry) is not None and not entry.lower().startswith("arn:")


def parse_senders(text: str) -> tuple[str, ...]:
    """The entries of a comma-separated list; ValueError naming the first malformed one."""
    entries = tuple(e.strip() for e in text.split(",") if e.strip())
    for entry in entries:
        if not valid_sender(entry):
            raise ValueError(f"{entry!r} is not a sender id (an IAM user or role unique id "
                             "such as AIDA... or AROA..., optionally :session)")
    return entries


def sender_matches(entries: Iterable[str], sender_id: str | None) -> bool:
    """True if one of *entries* is *sender_id*, or the role id of its session."""
    if not sender_id:
        return False
    role = sender_id.split(":", 1)[0]
    return any(entry == sender_id or (":" not in entry and entry == role) for entry in entries)
