"""Slack's requests to us: button clicks (interactivity) and the `/agentgov` command. Each is
checked against the signing secret and its timestamp window before anything is read, and a
signature is accepted once (a replay within the window is refused too). The click's person is
the account linked to its Slack team and user ids; the answer also goes to the message's
response_url, through the outbound allow-list (SLACK_ALLOWED_HOSTS)."""

import hashlib
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from chat import actions
from chat.choices import Provider
from chat.signing import BadSignature, verify
from config import outbound, redis_connection
from config.api_errors import error_body
from config.errors import DomainError

log = logging.getLogger(__name__)
SEEN = "chat:slack:seen:"
MAX_BODY = 65536


def _refuse(status: int, message: str, code: str) -> JsonResponse:
    return JsonResponse(error_body(status, message, code=code), status=status)


def _checked_body(request: HttpRequest) -> bytes:
    """The raw body, if Slack signed it within the window and it was not seen before."""
    body = request.body
    if len(body) > MAX_BODY:
        raise BadSignature("the request is too large")
    signature = request.headers.get("X-Slack-Signature")
    verify(settings.SLACK_SIGNING_SECRET, request.headers.get("X-Slack-Request-Timestamp"),
           body, signature, time.time(), settings.SLACK_REQUEST_MAX_AGE_SECONDS)
    key = SEEN + hashlib.sha256(str(signature).encode()).hexdigest()
    try:
        first = redis_connection.client().set(
            key, 1, nx=True, ex=settings.SLACK_REQUEST_MAX_AGE_SECONDS * 2)
    except RedisError:
        raise BadSignature("replays cannot be checked now (Redis is unreachable)") from None
    if not first:
        raise BadSignature("the request was already received (a replay)")
    return body


def _form(body: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}


@csrf_exempt
@require_POST
def interactions(request: HttpRequest) -> JsonResponse:
    """A button click on one of our messages."""
    try:
        body = _checked_body(request)
    except BadSignature as error:
        return _refuse(401, str(error), "bad_signature")
    try:
        payload = json.loads(_form(body).get("payload") or "")
        workspace = str((payload.get("team") or {}).get("id") or "")
        external_id = str((payload.get("user") or {}).get("id") or "")
        (action,) = payload["actions"]
        button, value = str(action["action_id"]), str(action.get("value") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return _refuse(400, "Not a block_actions payload with one action.", "malformed")
    if payload.get("type") != "block_actions" or not workspace or not external_id:
        return _refuse(400, "Not a block_actions payload from a Slack user.", "malformed")
    answer = actions.answer_click(provider=Provider.SLACK, workspace=workspace,
                                  external_id=external_id, button=button, value=value)
    _reply(str(payload.get("response_url") or ""), answer)
    return JsonResponse({"done": answer.done, "text": answer.text, "code": answer.code})


def _reply(response_url: str, answer: actions.Answer) -> None:
    """Tell the channel (done: the message is replaced) or the clicker alone (refused)."""
    if not response_url:
        return
    message: dict[str, Any] = ({"replace_original": True, "text": answer.text} if answer.done
                               else {"replace_original": False, "response_type": "ephemeral",
                                     "text": answer.text})
    try:
        post(response_url, message)
    except OSError as error:  # the click's outcome stands; the message just is not updated
        log.warning("could not answer Slack at its response URL: %s", error)


def post(url: str, message: dict[str, Any]) -> None:
    """POST a message to a Slack URL (webhook or response URL) through the allow-list;
    OSError when it is refused or fails."""
    try:
        destination = outbound.check(url, settings.SLACK_ALLOWED_HOSTS)
    except outbound.Refused as error:
        raise OSError(str(error)) from None
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    answer = outbound.send(destination, "POST", target,
                           {"Content-Type": "application/json"},
                           json.dumps(message).encode(), timeout=5, max_bytes=65536)
    if not 200 <= answer.status < 300:
        raise OSError(f"Slack answered {answer.status}")


@csrf_exempt
@require_POST
def commands(request: HttpRequest) -> JsonResponse:
    """`/agentgov link CODE`: link the sending Slack account to the code's person."""
    try:
        form = _form(_checked_body(request))
    except BadSignature as error:
        return _refuse(401, str(error), "bad_signature")
    words = (form.get("text") or "").split()
    workspace, external_id = form.get("team_id") or "", form.get("user_id") or ""
    if len(words) != 2 or words[0] != "link" or not workspace or not external_id:
        return JsonResponse({"response_type": "ephemeral",
                             "text": "Usage: /agentgov link CODE (the code the console gave "
                                     "you)."})
    try:
        account = actions.link_account(provider=Provider.SLACK, workspace=workspace,
                                       external_id=external_id, code=words[1])
    except DomainError as error:
        return JsonResponse({"response_type": "ephemeral", "text": error.message})
    return JsonResponse({"response_type": "ephemeral",
                         "text": f"Linked: your clicks now act as {account.user.username}."})
