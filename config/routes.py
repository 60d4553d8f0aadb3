"""The routes of one kind of object, built from its views' names.

Most pages act on one object at a time, and their URLs, views and URL names say the same
word three times: ``<uuid:circle_id>/edit/`` is served by ``views.circle_edit`` and named
``circle_edit``. ``object_paths`` writes that rule once:

    ==========  =============================  ===================================
    action      route (after ``prefix``)       view and URL name
    ==========  =============================  ===================================
    ``list``    (the prefix itself)            ``<noun>_list``
    ``create``  ``new/``                       ``<noun>_create``
    ``detail``  ``<uuid:<noun>_id>/``          ``<noun>_detail``
    any other   ``<uuid:<noun>_id>/<action>/`` ``<noun>_<action>``
    ==========  =============================  ===================================

Routes that do not follow the rule stay written out with ``path()`` beside it.
"""

from __future__ import annotations

from types import ModuleType

from django.urls import URLPattern, path


def object_paths(
    views: ModuleType, noun: str, actions: list[str], *, prefix: str = "", id_name: str = ""
) -> list[URLPattern]:
    """One ``path()`` per action, in the order given; ``id_name`` when the id is not ``<noun>_id``."""
    object_route = f"{prefix}<uuid:{id_name or noun + '_id'}>/"
    routes = {"list": prefix, "create": f"{prefix}new/", "detail": object_route}
    patterns = []
    for action in actions:
        name = f"{noun}_{action}"
        patterns.append(path(routes.get(action, f"{object_route}{action}/"), getattr(views, name), name=name))
    return patterns
