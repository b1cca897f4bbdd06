from django.urls import path

from bookings import views

urlpatterns = [
    path("teams/<slug:slug>/bookings/", views.team_bookings, name="team-bookings"),
    path("teams/<slug:slug>/bookings/quote/", views.team_booking_quote, name="team-booking-quote"),
    path("bookings/<uuid:pk>/cancel/", views.booking_cancel_view, name="booking-cancel"),
    path(
        "bookings/<uuid:pk>/workspaces/",
        views.booking_workspace_add,
        name="booking-workspace-add",
    ),
    path("bookings/", views.all_bookings, name="bookings"),
]
