r"""How the metadata tree maps onto etcd's flat, byte-ordered key space (pure, no I/O).

etcd has keys, not a tree: a range read returns every key between two byte strings, in byte
order. The layout below makes each tree operation one range, exact and cheap:

**Nodes.** A node's key is its path with every ``/`` replaced by ``\x00``, under the ``n``
space: ``/admin/policies`` → ``n\x00admin\x00policies``. Segments never contain ``\x00``
(``validate_path`` rejects it) and are never empty, so ``\x00`` is the smallest byte that can
follow a path in a key, and a node with its whole subtree is exactly the range
``[key(P), key(P) + b"\x01")``: the node itself, then ``key(P) + b"\x00..."`` below it. Siblings
such as ``/a-b`` next to ``/a`` (``-`` sorts before ``/``) fall outside it, which a plain ``/``
separator would not give. Watches use this range, and byte order is code-point order, so names
come out sorted as Python sorts them.

**Children.** ``children`` must also name *implicit* parents (``/a`` has child ``b`` when only
``/a/b/c`` holds a value), and listing every descendant to find them would cost the size of the
subtree. So every node also writes one *link* per ancestor: the link ``(A, s, lease)`` says
"something at or below ``A/s`` exists, owned by ``lease``" (``0`` for persistent nodes). Its
key, under the ``c`` space, is ``key(A) + b"\x00\x00" + s + b"\x00" + lease``: ``\x00\x00``
cannot occur inside ``key(A)`` (segments are not empty), so the links of ``A``'s children are
exactly the keys with prefix ``c`` + ``key(A) + b"\x00\x00"``, and listing costs the number of
(child, owner) pairs, not the subtree. A link carries its node's lease, so links of ephemeral
nodes vanish with their session as the nodes do. Links can go stale (a persistent node deleted
while another owner's node is still below the same child, then that owner's session ends), so
``children`` confirms the names it found with one range per name, and drops stale links; a
delete removes the links that no longer cover anything in the same transaction.

**Sequence counters** for sequential nodes live under ``s``: the counter key of parent ``P`` is
``s`` + ``key(P)``, and its etcd ``version`` (the count of puts to it) is the counter, which
only grows because the key is never deleted.

A *root* (a chroot such as ``/tenant-a``, from the URL's path) puts the whole layout under
``root + b"\x00"``, so stores with different roots share one etcd without meeting.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["KeyLayout", "Link", "subtree_end"]

_SEP: Final = b"\x00"
_LINKS_OF: Final = b"\x00\x00"


def subtree_end(key: bytes) -> bytes:
    """The end of the range ``[key, end)`` holding ``key`` and every key below it."""
    return key + b"\x01"


def _encode(path: str) -> bytes:
    # "/" -> b"", "/a/b" -> b"\x00a\x00b"
    return b"" if path == "/" else path.encode().replace(b"/", _SEP)


def _decode(encoded: bytes) -> str:
    return encoded.replace(_SEP, b"/").decode() or "/"


class Link(NamedTuple):
    """One link key: ``child`` of ``parent`` has something at or below it owned by ``lease``."""

    parent: str
    child: str
    lease: int


class KeyLayout:
    """The key names of one metadata tree in etcd.

    Args:
        root: A chroot path (``/tenant-a``) for the whole tree, or ``"/"`` for none.
    """

    def __init__(self, root: str = "/") -> None:
        base = b"" if root == "/" else root.encode() + _SEP
        self._nodes = base + b"n"
        self._links = base + b"c"
        self._counters = base + b"s"

    # ---- nodes ---------------------------------------------------------------------------------

    def node(self, path: str) -> bytes:
        """The key holding the value of the node at ``path``."""
        return self._nodes + _encode(path)

    def path_of(self, key: bytes) -> str:
        """The path of a node key (from a watch event)."""
        return _decode(key[len(self._nodes) :])

    def subtree(self, path: str) -> tuple[bytes, bytes]:
        """The range of the node at ``path`` and every node below it."""
        key = self.node(path)
        return key, subtree_end(key)

    def below(self, path: str) -> tuple[bytes, bytes]:
        """The range of the nodes strictly below ``path``."""
        key = self.node(path) + _SEP
        return key, subtree_end(key[:-1])

    # ---- links ---------------------------------------------------------------------------------

    def links_of(self, path: str) -> tuple[bytes, bytes]:
        """The range of the link keys of ``path``'s children."""
        prefix = self._links + _encode(path) + _LINKS_OF
        return prefix, _prefix_end(prefix)

    def links_of_child(self, parent: str, child: str) -> tuple[bytes, bytes]:
        """The range of the link keys of one child, for every lease."""
        prefix = self._links + _encode(parent) + _LINKS_OF + child.encode() + _SEP
        return prefix, _prefix_end(prefix)

    def link(self, parent: str, child: str, lease: int) -> bytes:
        """The key of one link."""
        return self.links_of_child(parent, child)[0] + b"%x" % lease

    def parse_link(self, key: bytes, parent: str) -> Link:
        """Read a link key found in ``links_of(parent)``."""
        rest = key[len(self.links_of(parent)[0]) :]
        child, _, lease = rest.partition(_SEP)
        return Link(parent, child.decode(), int(lease, 16))

    @staticmethod
    def ancestry(path: str) -> list[tuple[str, str]]:
        """``(parent, child name)`` for every ancestor edge of ``path``, from the root down."""
        segments = path.split("/")[1:]
        edges: list[tuple[str, str]] = []
        parent = "/"
        for name in segments:
            edges.append((parent, name))
            parent = f"{parent}{name}" if parent == "/" else f"{parent}/{name}"
        return edges

    # ---- sequential counters -------------------------------------------------------------------

    def counter(self, parent: str) -> bytes:
        """The key whose version counts the sequential nodes created under ``parent``."""
        return self._counters + _encode(parent)


def _prefix_end(prefix: bytes) -> bytes:
    # Every prefix here ends in b"\x00", so incrementing the last byte cannot overflow.
    return prefix[:-1] + bytes([prefix[-1] + 1])
