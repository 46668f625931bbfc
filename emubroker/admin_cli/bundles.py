"""``emubroker admin namespaces split-bundle``: ``pulsar-admin``'s bundle split command.

``split-bundle tenant/ns --bundle 0x00000000_0x40000000 [--unload] [--split-algorithm-name NAME]
[--split-boundaries POS ...]`` (or ``--bundle-type LARGEST|HOT`` instead of ``--bundle``), with
``pulsar-admin``'s short flags ``-b``, ``-bt``, ``-u``, ``-san``, ``-sb``. Boundaries may be
repeated or comma-separated, decimal or ``0x`` hex. Listing a namespace's bundles is
``namespaces bundles``.
"""

from __future__ import annotations

import argparse
import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["split_bundle_command"]


def _positions(text: str) -> list[int]:
    try:
        return [int(part.strip(), 0) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a hash position: {text!r}") from None


def split_bundle_command(sub: Any, path_of: Callable[[str], str]) -> None:
    """Add ``split-bundle`` to the ``namespaces`` subparsers.

    Args:
        sub: The ``namespaces`` subparsers.
        path_of: Turns ``tenant/namespace`` into its REST path.
    """
    split = sub.add_parser("split-bundle", help="split a namespace bundle")
    split.add_argument("namespace", help="tenant/namespace")
    which = split.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--bundle", help="{start-boundary}_{end-boundary}")
    which.add_argument("-bt", "--bundle-type", choices=("LARGEST", "HOT"), help="bundle type")
    split.add_argument(
        "-u", "--unload", action="store_true", help="unload the new bundles after the split"
    )
    split.add_argument(
        "-san",
        "--split-algorithm-name",
        help="range_equally_divide, topic_count_equally_divide, specified_positions_divide or "
        "flow_or_qps_equally_divide (default: the broker's)",
    )
    split.add_argument(
        "-sb",
        "--split-boundaries",
        type=_positions,
        action="extend",
        help="hash positions to split at (specified_positions_divide)",
    )

    def run(client: Any, args: argparse.Namespace) -> Any:
        query = {"unload": "true" if args.unload else "false"}
        if args.split_algorithm_name:
            query["splitAlgorithmName"] = args.split_algorithm_name
        bundle = urllib.parse.quote(args.bundle or args.bundle_type, safe="")
        path = f"{path_of(args.namespace)}/{bundle}/split?{urllib.parse.urlencode(query)}"
        return client.call("PUT", path, args.split_boundaries or None)

    split.set_defaults(run=run)
