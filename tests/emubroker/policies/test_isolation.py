"""Which namespaces setting an isolation policy unloads (Pulsar's ``unload_scope`` rules)."""

from __future__ import annotations

import pytest

from emubroker.policies.isolation import NamespaceIsolationData, namespaces_to_unload

NAMESPACES = ["public/a1", "public/a2", "public/b1", "public/c1"]


def policy(
    namespaces: list[str], primary: list[str], scope: str | None = None
) -> NamespaceIsolationData:
    return NamespaceIsolationData(namespaces=namespaces, primary=primary, unload_scope=scope)


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        # A new policy: every namespace it matches (all its regexes are "added").
        (policy(["public/a.*"], ["h1"]), None, ["public/a1", "public/a2"]),
        # Same regexes and primaries: nothing changed, nothing unloaded.
        (policy(["public/a.*"], ["h1"]), policy(["public/a.*"], ["h1"]), []),
        # A regex added and one removed: the namespaces either of them matches.
        (
            policy(["public/a.*", "public/b.*"], ["h1"]),
            policy(["public/a.*", "public/c.*"], ["h1"]),
            ["public/b1", "public/c1"],
        ),
        # Primaries changed: every namespace of either policy.
        (
            policy(["public/a.*"], ["h2"]),
            policy(["public/a.*", "public/c.*"], ["h1"]),
            ["public/a1", "public/a2", "public/c1"],
        ),
        # all_matching: every namespace matched, changed or not.
        (
            policy(["public/a.*"], ["h1"], "all_matching"),
            policy(["public/a.*"], ["h1"]),
            NAMESPACES[:2],
        ),
        # none: nothing, even with new primaries.
        (policy(["public/a.*"], ["h2"], "none"), policy(["public/a.*"], ["h1"]), []),
        # Regexes match whole names (Java's Pattern.matches).
        (policy(["public/a"], ["h1"]), None, []),
    ],
)
def test_namespaces_to_unload(
    new: NamespaceIsolationData, old: NamespaceIsolationData | None, expected: list[str]
) -> None:
    assert namespaces_to_unload(NAMESPACES, new, old) == expected
