"""Shared pieces of the generated bad-input tests (issue 20 item 5): Hypothesis settings and strategies.

Every protocol edge gets inputs generated (and shrunk) by Hypothesis rather than hand-picked.
Example counts stay modest: the tests run in `make test`, where the whole set adds well under
a minute and a half. A failing example is printed by Hypothesis; pin it with `@example`.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SLOW_HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]


def edge_settings(max_examples: int) -> settings:
    """No deadline (a subprocess or a daemon round trip varies on a loaded 2-core machine)."""
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=SLOW_HEALTH)


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
"""Printable and unprintable text, no lone surrogates (they cannot cross a UTF-8 wire)."""
ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40)
"""What an environment variable can hold."""
LONG_TEXT = st.integers(200, 5000).map(lambda n: "a" * n)

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT | LONG_TEXT
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def mutated(base: dict[str, Any], keys: list[str] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """`base` with some of its keys dropped or given any JSON value, and maybe a stray key added."""
    names = keys or sorted(base)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out = json.loads(json.dumps(base))
        for key in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
            if draw(st.booleans()):
                out.pop(key, None)
            else:
                out[key] = draw(JSON_VALUES)
        if draw(st.booleans()):
            out[draw(TEXT)] = draw(JSON_VALUES)
        return out

    return build()


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into nested dicts and lists (the document's own places to break)."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def deep_mutated(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` with values anywhere in it dropped or replaced by any JSON value (wrong types included)."""
    paths = _paths(base)

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out = json.loads(json.dumps(base))
        for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=4, unique=True)):
            parent = out
            try:
                for k in path[:-1]:
                    parent = parent[k]
                if draw(st.booleans()) and isinstance(parent, dict):
                    parent.pop(path[-1], None)
                else:
                    parent[path[-1]] = draw(JSON_VALUES)
            except (KeyError, IndexError, TypeError):
                continue  # an earlier mutation replaced an ancestor
        return out

    return build()
