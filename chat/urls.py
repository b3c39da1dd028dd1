from django.urls import path

from chat import api, slack

api_urlpatterns = [
    path("chat/link-codes", api.LinkCodesView.as_view(), name="chat-link-codes"),
    path("chat/accounts", api.AccountsView.as_view(), name="chat-accounts"),
    path("chat/accounts/<int:pk>", api.AccountView.as_view(), name="chat-account"),
]

urlpatterns = [
    path("slack/interactions", slack.interactions, name="chat-slack-interactions"),
    path("slack/commands", slack.commands, name="chat-slack-commands"),
]
