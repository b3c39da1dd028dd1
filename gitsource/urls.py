from django.urls import path

from gitsource import api

api_urlpatterns = [
    path("git/sources", api.GitSourcesView.as_view(), name="git-sources"),
    path("git/sources/<slug:name>/poll", api.GitSourcePollView.as_view(), name="git-poll"),
    path("git/sources/<slug:name>/webhook", api.GitWebhookView.as_view(), name="git-webhook"),
    path("git/signing-keys", api.SigningKeysView.as_view(), name="git-signing-keys"),
    path("agents/<slug:name>/git", api.AgentGitStatusView.as_view(), name="agent-git"),
]
