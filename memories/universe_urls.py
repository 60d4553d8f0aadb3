from __future__ import annotations

from django.urls import path

from memories import universe_views

urlpatterns = [
    path("", universe_views.universe, name="universe"),
    path("graph.json", universe_views.universe_graph_json, name="universe_graph"),
]
