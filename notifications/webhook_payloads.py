"""What each kind of webhook is sent: pure functions from an event's facts to a JSON body and
headers. No ORM, no clock (the caller passes the time).

Formats, as each service documents them:
- Microsoft Teams (incoming webhooks, and the "Post to a channel when a webhook request is
  received" workflow that replaces them): a message whose one attachment is an Adaptive Card,
  ``{"type": "message", "attachments": [{"contentType":
  "application/vnd.microsoft.card.adaptive", "content": {"type": "AdaptiveCard", ...}}]}``
  (learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/
  connectors-using#send-adaptive-cards-using-an-incoming-webhook). Version 1.4: the newest
  that both Teams clients render. A TextBlock's text is Markdown (bold, italic, lists, links
  ``[text](url)``), so every character that could start Markdown is backslash-escaped
  (CommonMark's escapes): a researcher's ``[Approve it here](https://evil.example)`` stays
  text, as in Slack.
- Slack (incoming webhooks, api.slack.com/messaging/webhooks): ``{"text": fallback, "blocks":
  [...]}`` with Block Kit section, context and actions blocks; the text in mrkdwn with ``&``,
  ``<`` and ``>`` escaped as ``&amp;``, ``&lt;``, ``&gt;`` and nothing else
  (api.slack.com/reference/surfaces/formatting#escaping), so a workspace's name can never
  become a link or a mention.
- Generic: our own signed JSON (docs/notifications.md): ``{"id", "event", "occurred_at",
  "team", "data"}`` with ``X-Portal-Signature: sha256=<hex HMAC-SHA256(secret,
  f"{timestamp}.{body}")>``.
"""

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SLACK_SECTION_MAX = 3000  # Block Kit: a section's text is at most 3000 characters
CARD_TEXT_MAX = 3000


@dataclass(frozen=True)
class Facts:
    """One event as every hook tells it: ``title`` and ``text`` (the notice's subject and
    text, times written in the team's zone), ``url`` (absolute, the page to open), ``data``
    (JSON-safe figures for machines: ids, USD strings, ISO times), ``team`` (slug and
    name)."""

    title: str
    text: str
    url: str
    data: dict[str, Any]
    team: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "text": self.text,
            "url": self.url,
            "data": self.data,
            "team": self.team,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Facts":
        return cls(raw["title"], raw["text"], raw["url"], raw["data"], raw["team"])


@dataclass(frozen=True)
class Request:
    """What to POST: the body's bytes and the headers (Content-Type included)."""

    body: bytes
    headers: dict[str, str]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_INLINE = re.compile(r"([\\`*_\[\]()<>~])")  # escapes, code, emphasis, links, autolinks
_BLOCK = re.compile(r"^(\s*)([#+-]|\d+(?=[.)]))", re.MULTILINE)  # headings, list items


def teams_escape(text: str) -> str:
    """``text`` safe inside an Adaptive Card TextBlock: what Markdown could read as a link,
    emphasis, code, a heading or a list item escaped with a backslash (CommonMark), so Teams
    shows it as written. Other punctuation ("$3.67", "e.g.") is left alone."""
    text = _INLINE.sub(r"\\\1", text)

    def block(match: re.Match[str]) -> str:
        lead, marker = match.group(1), match.group(2)
        if marker.isdigit():  # "1. " / "1) ": escape the delimiter after the number
            return lead + marker + "\\"
        return lead + "\\" + marker

    return _BLOCK.sub(block, text)


def teams_body(facts: Facts) -> dict[str, Any]:
    """The Adaptive Card message for Microsoft Teams (see the module's docstring)."""
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {
                "type": "TextBlock",
                "text": teams_escape(_cut(facts.title, 300)),
                "weight": "Bolder",
                "size": "Medium",
                "wrap": True,
            },
            {
                "type": "TextBlock",
                "text": teams_escape(_cut(facts.text, CARD_TEXT_MAX)),
                "wrap": True,
            },
            {
                "type": "TextBlock",
                "text": f"Team {teams_escape(facts.team['name'])}",
                "isSubtle": True,
                "spacing": "Small",
                "wrap": True,
            },
        ],
        "actions": [{"type": "Action.OpenUrl", "title": "Open in the portal", "url": facts.url}],
    }
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card,
            }
        ],
    }


def slack_escape(text: str) -> str:
    """``text`` safe inside Slack mrkdwn: only &, < and > escaped (Slack's formatting docs)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(facts: Facts) -> dict[str, Any]:
    """The Block Kit message for a Slack incoming webhook (see the module's docstring)."""
    section = f"*{slack_escape(facts.title)}*\n{slack_escape(facts.text)}"
    return {
        "text": slack_escape(facts.title),  # the notification's fallback
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _cut(section, SLACK_SECTION_MAX)},
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"Team {slack_escape(facts.team['name'])}"}
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open in the portal"},
                        "url": facts.url,
                    }
                ],
            },
        ],
    }


def generic_body(
    facts: Facts, *, delivery_id: str, event: str, occurred_at: datetime
) -> dict[str, Any]:
    """The generic hook's JSON: the delivery's id (the same on every retry, for
    de-duplication), the event, when it happened (ISO 8601, UTC), the team and the facts."""
    return {
        "id": delivery_id,
        "event": event,
        "occurred_at": occurred_at.isoformat(),
        "team": facts.team,
        "data": {"title": facts.title, "text": facts.text, "url": facts.url, **facts.data},
    }


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 under ``secret`` of ``f"{timestamp}.{body}"``."""
    signed = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify(secret: str, timestamp: str, body: bytes, header: str, now: int, window: int) -> bool:
    """What a receiver does (docs/notifications.md): the signature matches, compared in
    constant time, and ``timestamp`` (Unix seconds) is within ``window`` seconds of ``now``."""
    if not timestamp.isdigit() or abs(now - int(timestamp)) > window:
        return False
    return hmac.compare_digest(signature(secret, int(timestamp), body), header)


def build(
    *,
    kind: str,
    facts: Facts,
    event: str,
    delivery_id: str,
    occurred_at: datetime,
    secret: str,
    now: datetime,
) -> Request:
    """The request for a hook of ``kind`` ("teams" | "slack" | "generic"); ``now`` stamps the
    generic hook's signature (X-Portal-Timestamp, Unix seconds)."""
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if kind == "teams":
        payload = teams_body(facts)
    elif kind == "slack":
        payload = slack_body(facts)
    else:
        payload = generic_body(facts, delivery_id=delivery_id, event=event, occurred_at=occurred_at)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if kind == "generic":
        stamp = int(now.timestamp())
        headers |= {
            "X-Portal-Event": event,
            "X-Portal-Delivery": delivery_id,
            "X-Portal-Timestamp": str(stamp),
            "X-Portal-Signature": signature(secret, stamp, body),
        }
    return Request(body, headers)
