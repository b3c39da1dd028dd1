from django.urls import path

from gitsource import api

api_urlpatterns = [
    path("git/sources", api.GitSourcesView.as_view(), name="git-sources"),
    path("git/sources/<slug:name>/poll", api.GitSourcePollView.as_view(), name="git-poll"),
    path("git/sources/<slug:name>/webhook", api.GitWebhookView.as_view(), name="git-webhook"),
    path("git/signing-keys", api.SigningKeysView.as_view(), name="git-signing-keys"),
    path("git/policy-changes", api.PolicyChangesView.as_view(), name="git-policy-changes"),
    path("git/policy-changes/<int:pk>", api.PolicyChangeView.as_view(),
         name="git-policy-change"),
    path("git/policy-changes/<int:pk>/approve", api.PolicyChangeDecisionView.as_view(),
         name="git-policy-approve"),
    path("git/policy-changes/<int:pk>/reject",
         api.PolicyChangeDecisionView.as_view(decision="reject"), name="git-policy-reject"),
    path("policy-tests", api.PolicyTestsView.as_view(), name="policy-tests"),
    path("agents/<slug:name>/git", api.AgentGitStatusView.as_view(), name="agent-git"),
]
