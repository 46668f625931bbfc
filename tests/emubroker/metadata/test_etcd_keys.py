"""The etcd key layout: each tree operation is one exact key range."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.metadata.etcd_keys import KeyLayout, Link

# Segments as validate_path allows them: anything but "/" and NUL, not "." or "..".
segment = st.text(
    st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=4,
).filter(lambda s: s not in (".", ".."))
paths = st.lists(segment, min_size=1, max_size=4).map(lambda segs: "/" + "/".join(segs))


def inside(key: bytes, bounds: tuple[bytes, bytes]) -> bool:
    return bounds[0] <= key < bounds[1]


def is_at_or_below(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix + "/")


def test_node_keys_replace_separators_with_nul() -> None:
    layout = KeyLayout()
    assert layout.node("/admin/policies") == b"n\x00admin\x00policies"
    assert layout.path_of(b"n\x00admin\x00policies") == "/admin/policies"


def test_a_sibling_that_sorts_between_a_node_and_its_children_is_outside_its_subtree() -> None:
    layout = KeyLayout()
    # "-" (0x2d) sorts before "/" (0x2f): with "/" as the separator /a-b would land between /a
    # and /a/b.
    assert not inside(layout.node("/a-b"), layout.subtree("/a"))
    assert inside(layout.node("/a/b"), layout.subtree("/a"))
    assert inside(layout.node("/a"), layout.subtree("/a"))
    assert not inside(layout.node("/a"), layout.below("/a"))


@given(paths, paths)
def test_subtree_holds_exactly_the_node_and_what_is_below_it(path: str, prefix: str) -> None:
    layout = KeyLayout()
    assert inside(layout.node(path), layout.subtree(prefix)) == is_at_or_below(path, prefix)
    assert inside(layout.node(path), layout.subtree("/"))


@given(paths, paths, st.integers(0, 2**63 - 1))
def test_links_of_a_parent_are_exactly_its_direct_children(
    node: str, parent: str, lease: int
) -> None:
    layout = KeyLayout()
    for edge_parent, child in layout.ancestry(node):
        key = layout.link(edge_parent, child, lease)
        assert inside(key, layout.links_of(parent)) == (edge_parent == parent)
        assert inside(key, layout.links_of_child(edge_parent, child))
        if edge_parent == parent:
            assert layout.parse_link(key, parent) == Link(parent, child, lease)


@given(st.lists(segment, min_size=2, max_size=6, unique=True))
def test_links_come_back_in_name_order(names: list[str]) -> None:
    layout = KeyLayout()
    keys = sorted(layout.link("/p", name, 7) for name in names)
    assert [layout.parse_link(k, "/p").child for k in keys] == sorted(names)


def test_ancestry_lists_every_edge_from_the_root() -> None:
    assert KeyLayout.ancestry("/a/b/c") == [("/", "a"), ("/a", "b"), ("/a/b", "c")]


@pytest.mark.parametrize("other_root", ["/t/x", "/tx", "/"])
def test_roots_keep_layouts_apart(other_root: str) -> None:
    layout, other = KeyLayout("/t"), KeyLayout(other_root)
    for bounds in (layout.subtree("/"), layout.links_of("/")):
        for key in (other.node("/a"), other.link("/", "a", 0), other.counter("/")):
            assert not inside(key, bounds)
    assert layout.counter("/") != other.counter("/")
