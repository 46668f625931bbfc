"""``PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split``: split a namespace bundle.

The checks come in Pulsar's order (``NamespacesBase.internalSplitNamespaceBundleAsync``):

1. A super-user only (``access.rule_for``).
2. ``splitAlgorithmName``, when given, must be one of ``supportedNamespaceBundleSplitAlgorithms``
   (412 "Unsupported namespace bundle split algorithm, supported algorithms are [...]"); with
   ``specified_positions_divide`` the body (``splitBoundaries``, a JSON array of hash positions)
   must not be empty (412). Without a name the broker's ``defaultNamespaceBundleSplitAlgorithm``
   is used.
3. ``{bundle}`` may be ``LARGEST`` (the bundle with most persistent topics) or ``HOT`` (the one
   with the highest throughput; Pulsar reads the leader's long-term bundle data, here the topics'
   current rates on this broker); none found is a 404 "Bundle range LARGEST not found".
4. The namespace must exist (404), and the range must be one of its bundles
   (``validateNamespaceBundleRange``: 412 with Pulsar's reasons, e.g. "Cannot find bundle
   tenant/ns/0x00000000_0x10000000 in the bundles list").
5. Another broker owning the bundle answers 307 to its admin URL (``authoritative`` set when this
   broker is the leader); a bundle nobody owns is acquired by this broker, which splits it.
6. The split itself (``loadbalance.ownership.bundle_split``): an invalid request is 412 "Split
   bundle failed due to invalid request"; other failures are 500 with the reason.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Final

from aiohttp import web

from emubroker.admin.bundle_wiring import namespace_topics, topic_loads
from emubroker.admin.errors import INTERNAL, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.http import (
    context,
    namespace_of,
    no_content,
    query_bool,
    read_json,
    redirect_to,
)
from emubroker.loadbalance.ownership.bundle_split import (
    BundleSplitter,
    InvalidSplitError,
    SplitFailedError,
    parse_boundaries,
)
from emubroker.naming import MAX_HASH, BundleRange, InvalidNameError, NamespaceBundle, name_hash

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.admin.context import AdminContext
    from emubroker.naming import NamespaceName

__all__ = ["add_routes", "checked_bundle"]

SPECIFIED_POSITIONS: Final = "specified_positions_divide"
_LONG: Final = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|#[0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _java_long(text: str) -> int:
    """Java's ``Long.decode``: decimal, ``0x``/``#`` hex or ``0`` octal, with a sign.

    Raises:
        RestError: 412 with Java's ``NumberFormatException`` message.
    """
    if not text:
        raise RestError(PRECONDITION_FAILED, "Zero length string")
    if _LONG.fullmatch(text) is None:
        raise RestError(PRECONDITION_FAILED, f'For input string: "{text}"')
    sign = -1 if text[0] == "-" else 1
    digits = text.lstrip("+-")
    if digits[:2].lower() == "0x":
        return sign * int(digits[2:], 16)
    if digits[0] == "#":
        return sign * int(digits[1:], 16)
    if len(digits) > 1 and digits[0] == "0":
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def checked_bundle(
    namespace: NamespaceName, boundaries: Sequence[int], name: str
) -> NamespaceBundle:
    """The namespace's bundle called ``name`` (Pulsar's ``validateNamespaceBundleRange``).

    Raises:
        RestError: 412 with Pulsar's reason when ``name`` is not one of the namespace's bundles.
    """
    parts = list(name.split("_"))
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    if "_" not in name or len(parts) < 2:
        raise RestError(PRECONDITION_FAILED, f"Invalid bundle range: {name}")
    lower, upper = _java_long(parts[0]), _java_long(parts[1])
    closed = "]" if upper == MAX_HASH else ")"
    if lower > upper:
        raise RestError(PRECONDITION_FAILED, f"Invalid range: [{lower}..{upper}{closed}")
    try:
        bundle = NamespaceBundle(namespace, BundleRange(lower, upper))
    except InvalidNameError:
        # Outside the 32-bit hash space, or [x..x) below the top: Pulsar builds the bundle
        # and fails to find it, or refuses the empty range.
        if lower == upper:
            raise RestError(
                PRECONDITION_FAILED, "Cannot create bundle object for an empty key range"
            ) from None
        shown = f"{namespace}/0x{lower & 0xFFFFFFFFFFFFFFFF:08x}_0x{upper & 0xFFFFFFFFFFFFFFFF:08x}"
        raise RestError(
            PRECONDITION_FAILED, f"Cannot find bundle {shown} in the bundles list"
        ) from None
    if lower not in boundaries[:-1]:
        raise RestError(PRECONDITION_FAILED, f"Cannot find bundle {bundle} in the bundles list")
    index = boundaries.index(lower)
    expected = NamespaceBundle(namespace, BundleRange(lower, boundaries[index + 1]))
    if expected.bundle_range.upper != upper:
        raise RestError(
            PRECONDITION_FAILED,
            f"Invalid upper boundary for bundle {bundle}. Expected upper boundary of {expected}",
        )
    return bundle


def _bundles_of(boundaries: Sequence[int]) -> list[BundleRange]:
    return [BundleRange(a, b) for a, b in itertools.pairwise(boundaries)]


def _largest(ctx: AdminContext, namespace: NamespaceName, boundaries: Sequence[int]) -> str | None:
    """The bundle with most persistent topics (``getBundleWithHighestTopicsAsync``)."""
    ranges = _bundles_of(boundaries)
    counts: dict[BundleRange, int] = {}
    best, most = None, 0
    for topic in namespace_topics(ctx.topics, namespace):
        if topic.startswith("persistent://"):
            found = next(r for r in ranges if r.contains(name_hash(topic)))
            counts[found] = counts.get(found, 0) + 1
            if counts[found] > most:  # ties: the first bundle to reach the count
                best, most = found, counts[found]
    return None if best is None else best.name


def _hottest(
    ctx: AdminContext, splitter: BundleSplitter, namespace: NamespaceName, boundaries: Sequence[int]
) -> str | None:
    """The bundle with topics and the highest throughput in + out, by the topics' current rates."""
    best, highest = None, -1.0
    for bundle_range in _bundles_of(boundaries):
        topics = splitter.topics_in(NamespaceBundle(namespace, bundle_range))
        if topics:
            loads = topic_loads(ctx.stats, topics).values()
            throughput = sum(load.msg_throughput_in + load.msg_throughput_out for load in loads)
            if throughput > highest:
                best, highest = bundle_range, throughput
    return None if best is None else best.name


async def split_bundle(request: web.Request) -> web.Response:
    """``PUT .../{bundle}/split?unload=&splitAlgorithmName=`` with optional ``splitBoundaries``."""
    namespace = namespace_of(request)
    ctx = context(request)
    conf = ctx.dynamic.config
    algorithm = request.query.get("splitAlgorithmName", "").strip()
    positions = await read_json(request, list[int], what="splitBoundaries", default=None)
    if algorithm:
        supported = conf.supportedNamespaceBundleSplitAlgorithms
        if algorithm not in supported:
            raise RestError(
                PRECONDITION_FAILED,
                "Unsupported namespace bundle split algorithm, supported algorithms are "
                f"[{', '.join(supported)}]",
            )
        if algorithm.lower() == SPECIFIED_POSITIONS and not positions:
            raise RestError(
                PRECONDITION_FAILED,
                "With specified_positions_divide split algorithm, splitBoundaries must not be "
                "empty",
            )
    else:
        algorithm = conf.defaultNamespaceBundleSplitAlgorithm
    splitter = ctx.bundle_splitter
    if splitter is None:
        raise RestError(INTERNAL, "This broker cannot split bundles")
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    try:
        boundaries = parse_boundaries(policies.bundles)
    except ValueError:
        raise RestError(
            INTERNAL, f"Unreadable bundle boundaries of namespace {namespace}"
        ) from None
    name = request.match_info["bundle"]
    if name in ("LARGEST", "HOT"):
        found = (
            _largest(ctx, namespace, boundaries)
            if name == "LARGEST"
            else _hottest(ctx, splitter, namespace, boundaries)
        )
        if found is None:
            raise RestError(NOT_FOUND, f"Bundle range {name} not found")
        name = found
    bundle = checked_bundle(namespace, boundaries, name)
    owner = await ctx.ownership.owner_of_bundle(bundle)
    if owner != ctx.ownership.me:
        # Pulsar's validateBundleOwnership: authoritative only when the leader sends it on.
        leader = ctx.leader_election is not None and ctx.leader_election.is_leader()
        raise redirect_to(request, owner.http_url, authoritative=str(leader).lower())
    try:
        await splitter.split(
            bundle, algorithm, positions=positions, unload=query_bool(request, "unload")
        )
    except InvalidSplitError:
        raise RestError(PRECONDITION_FAILED, "Split bundle failed due to invalid request") from None
    except SplitFailedError as exc:
        raise RestError(INTERNAL, str(exc)) from None
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the bundle routes."""
    app.router.add_put("/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split", split_bundle)
