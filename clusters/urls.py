from django.urls import path

from clusters import views

app_name = "clusters"

urlpatterns = [
    path("", views.cluster_list, name="list"),
    path("<int:pk>/", views.cluster_detail, name="detail"),
    path("<int:pk>/teams/", views.cluster_team, name="team"),
    path("<int:pk>/pools/", views.pool_create, name="pool-create"),
    path("<int:pk>/pools/adoptable/", views.pools_adoptable, name="pools-adoptable"),
    path("<int:pk>/pools/adopt/", views.pool_adopt, name="pool-adopt"),
    path("<int:pk>/pools/<int:pool_pk>/delete/", views.pool_delete, name="pool-delete"),
]
