"""What a cluster control is aimed at: a topic, a bundle or a namespace, and its REST path.

``unload`` takes any of the three as a string, the way a test names them: a topic by complete
or short name (``persistent://public/default/t``, ``public/default/t``, ``t``), a namespace as
``tenant/namespace``, a bundle as ``tenant/namespace/0x00000000_0x40000000`` (Pulsar's bundle
name: the namespace and the range's two 32-bit hex boundaries).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Final

from emubroker.adminclient.paths import path
from emubroker.naming import InvalidNameError, NamespaceName, TopicName

__all__ = ["Bundle", "Namespace", "Target", "Topic", "parse_target"]

_BUNDLE: Final = re.compile(
    r"(?P<namespace>[^/]+/[^/]+)/(?P<range>0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8})"
)


@dataclass(frozen=True, slots=True)
class Topic:
    name: str

    @property
    def path(self) -> str:
        return path("topic", topic=str(TopicName.parse(self.name)))

    @property
    def lookup_path(self) -> str:
        """``/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}``."""
        return path("topic.lookup", topic=str(TopicName.parse(self.name)))


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str

    @property
    def path(self) -> str:
        return path("namespace", namespace=str(NamespaceName.parse(self.name)))


@dataclass(frozen=True, slots=True)
class Bundle:
    namespace: str
    range: str

    @property
    def path(self) -> str:
        return (
            f"{path('namespace', namespace=str(NamespaceName.parse(self.namespace)))}/{self.range}"
        )

    def __str__(self) -> str:
        return f"{self.namespace}/{self.range}"


Target = Topic | Namespace | Bundle


def parse_target(text: str) -> Target:
    """Tell a topic, a namespace and a bundle apart (see the module docstring).

    Raises:
        ValueError: Not a valid name of any of them.
    """
    try:
        if "://" not in text:
            if (match := _BUNDLE.fullmatch(text)) is not None:
                NamespaceName.parse(match["namespace"])
                return Bundle(match["namespace"], match["range"].lower())
            if text.count("/") == 1:
                return Namespace(str(NamespaceName.parse(text)))
        return Topic(str(TopicName.parse(text)))
    except InvalidNameError as exc:
        raise ValueError(f"{text!r} is not a topic, namespace or bundle name: {exc}") from None


def query(**params: str | None) -> str:
    """``?k=v&...`` of the parameters that are set, or ``""``."""
    given = {k: v for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(given) if given else ""
