from django.urls import path

from notifications import views

urlpatterns = [
    path("notices/", views.notice_list, name="notice-list"),
    path("notices/<int:pk>/dismiss/", views.notice_dismiss, name="notice-dismiss"),
]
