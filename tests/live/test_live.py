"""Live pages: change stamps are bumped when a change commits (never on rollback), pages sign
the topics they show, and the stream tells of changes to those topics only, to their user only.
The browser side (a page open during an idle stop) is in tests/browser/test_browser_live.py."""

import asyncio
import html
import re
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.core.signing import b64_encode
from django.db import connections, transaction
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from live import stamps, streams, tokens
from notifications.notices import notice_send
from tests.factories import WorkspaceFactory
from workspaces import states
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()


def _running(cast):
    return WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)


def _topics_of(ws):
    return [f"ws:{ws.pk}", f"team:{ws.team_id}", f"user:{ws.owner_id}", "workspaces"]


def _stop(ws):
    return states.transition(
        workspace_id=ws.pk,
        expected=Status.RUNNING,
        to=Status.STOPPING,
        now=timezone.now(),
        reason="Stopped for idleness",
    )


def test_a_status_change_bumps_its_workspace_team_owner_and_lists_once_it_commits(cast):
    ws = _running(cast)
    before = stamps.read(_topics_of(ws))
    with pytest.raises(RuntimeError), transaction.atomic():
        assert _stop(ws)
        raise RuntimeError("rolled back")
    assert stamps.read(_topics_of(ws)) == before

    assert _stop(ws)
    after = stamps.read(_topics_of(ws))
    assert all(after[t] and after[t] != before[t] for t in after)


def test_a_notice_bumps_only_its_users_topic(cast):
    other = f"user:{cast.teammate.pk}"
    before = stamps.read([f"user:{cast.researcher.pk}", other])
    notice_send(users=[cast.researcher], subject="s", text="t", link="/", now=timezone.now())
    after = stamps.read([f"user:{cast.researcher.pk}", other])
    assert after[f"user:{cast.researcher.pk}"] != before[f"user:{cast.researcher.pk}"]
    assert after[other] == before[other]


def _config(client, url):
    page = client.get(url).content.decode()
    element = re.search(r'<div id="live-config"[^>]*>', page)[0]
    token = html.unescape(re.search(r'data-token="([^"]+)"', element)[1])
    return token, re.search(r'data-version="([^"]+)"', element)[1]


def test_a_workspace_page_subscribes_to_that_workspace_for_its_viewer(client, cast):
    ws = _running(cast)
    client.force_login(cast.researcher)
    token, _ = _config(client, reverse("workspaces:detail", kwargs={"pk": ws.pk}))
    topics = tokens.parse(token, user_id=cast.researcher.pk)
    assert f"ws:{ws.pk}" in topics and f"user:{cast.researcher.pk}" in topics


def _stream(client, token, version=""):
    return client.get(reverse("live-stream"), {"t": token, "v": version})


def test_the_stream_refuses_tampered_foreign_and_anonymous_subscriptions(client, cast):
    ws = _running(cast)
    client.force_login(cast.researcher)
    token, _ = _config(client, reverse("workspaces:detail", kwargs={"pk": ws.pk}))
    payload, rest = token.split(":", 1)
    forged = b64_encode(f'[{cast.researcher.pk},["workspaces"]]'.encode()).decode()
    assert _stream(client, f"{forged}:{rest}").status_code == 400
    assert _stream(client, "").status_code == 400

    client.force_login(cast.outsider)  # the researcher's token, another user's session
    assert _stream(client, token).status_code == 403
    client.logout()
    assert _stream(client, token).status_code == 403
    assert client.get(reverse("live-poll"), {"t": token}).status_code == 403


def test_the_stream_tells_of_a_change_made_after_the_page_was_rendered(client, cast):
    ws = _running(cast)
    client.force_login(cast.researcher)
    token, version = _config(client, reverse("workspaces:detail", kwargs={"pk": ws.pk}))
    assert _stop(ws)  # e.g. the idle sweep, between the render and the stream's start

    response = _stream(client, token, version)
    assert response["Content-Type"] == "text/event-stream"
    chunks = iter(response.streaming_content)
    assert b"retry:" in next(chunks)
    event = next(chunks)
    assert event.startswith(b"event: change\nid: ")
    response.close()


def test_the_poll_answers_304_until_a_topic_changes(client, cast):
    ws = _running(cast)
    client.force_login(cast.researcher)
    token, version = _config(client, reverse("workspaces:detail", kwargs={"pk": ws.pk}))
    url = reverse("live-poll")
    unchanged = {"If-None-Match": f'"{version}"'}
    assert client.get(url, {"t": token}, headers=unchanged).status_code == 304
    assert _stop(ws)
    changed = client.get(url, {"t": token}, headers=unchanged)
    assert changed.status_code == 200 and changed.json()["version"] != version


def test_the_asgi_stream_wakes_only_for_its_topics(cast, monkeypatch):
    monkeypatch.setattr(streams, "TICK", 0.05)
    mine, theirs = f"ws:{uuid.uuid4()}", f"ws:{uuid.uuid4()}"
    token = tokens.sign(user_id=cast.researcher.pk, topics=[mine])

    async def scenario():
        client = AsyncClient()
        await sync_to_async(client.force_login)(cast.researcher)
        response = await client.get(reverse("live-stream"), {"t": token, "v": "0"})
        chunks = aiter(response.streaming_content)
        assert b"retry:" in await anext(chunks)
        first = await asyncio.wait_for(anext(chunks), 5)  # "0" is not the current version
        assert first.startswith(b"event: change")
        await sync_to_async(stamps.bump_now)([theirs])
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(nxt := asyncio.ensure_future(anext(chunks))), 1)
        await sync_to_async(stamps.bump_now)([mine])
        assert (await asyncio.wait_for(nxt, 5)).startswith(b"event: change")
        nxt.cancel()
        # The view ran in asgiref's thread: close its database connection there.
        await sync_to_async(connections.close_all)()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("who", "page", "topic"),
    [
        ("platform_admin", "workspaces:list", "workspaces"),
        ("researcher", "workspaces:list", "team:{team}"),
        ("researcher", "team-detail", "team:{team}"),
        ("platform_admin", "approvals", "approvals"),
    ],
)
def test_each_page_follows_the_topics_it_shows(client, cast, who, page, topic):
    user = getattr(cast, who)
    client.force_login(user)
    kwargs = {"slug": cast.team.slug} if page == "team-detail" else {}
    token, _ = _config(client, reverse(page, kwargs=kwargs))
    topics = tokens.parse(token, user_id=user.pk)
    assert topic.format(team=cast.team.pk) in topics and f"user:{user.pk}" in topics
    assert f"team:{cast.other_team.pk}" not in topics  # nothing it may not see


def test_the_asgi_stream_ends_when_its_session_topic_moves(cast, monkeypatch):
    monkeypatch.setattr(streams, "TICK", 0.05)
    token = tokens.sign(user_id=cast.researcher.pk, topics=[f"team:{cast.team.pk}"])

    async def scenario():
        client = AsyncClient()
        await sync_to_async(client.force_login)(cast.researcher)
        response = await client.get(reverse("live-stream"), {"t": token, "v": "0"})
        chunks = aiter(response.streaming_content)
        assert b"retry:" in await anext(chunks)
        assert (await asyncio.wait_for(anext(chunks), 5)).startswith(b"event: change")
        # What the Graph sync does when it deactivates the user (teams.entra_sync).
        await sync_to_async(stamps.bump_now)([stamps.topic("session", cast.researcher.pk)])
        assert await asyncio.wait_for(anext(chunks), 5) == streams.END
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(chunks), 5)
        await sync_to_async(connections.close_all)()

    asyncio.run(scenario())
