from django.urls import path

from live import views

urlpatterns = [
    path("live/stream/", views.live_stream, name="live-stream"),
    path("live/poll/", views.live_poll, name="live-poll"),
]
