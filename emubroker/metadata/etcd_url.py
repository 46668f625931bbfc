"""Metadata URLs that name an etcd cluster.

Two spellings are accepted:

- ``etcd://host:2379,host2:2379/chroot``: ours, like ``stub://``; the optional path puts the
  whole tree under that chroot (so several clusters can share one etcd).
- ``etcd:http://host:2379,http://host2:2379``: Pulsar's ``metadataStoreUrl`` form.

The port defaults to etcd's client port, 2379. TLS (``https``) is not supported.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from emubroker.metadata.store import InvalidPathError, validate_path

__all__ = ["DEFAULT_ETCD_PORT", "EtcdAddress", "is_etcd_url", "parse_etcd_url"]

DEFAULT_ETCD_PORT: Final = 2379
_SCHEME: Final = "etcd:"


class EtcdAddress(NamedTuple):
    """Where an etcd metadata store lives.

    Attributes:
        endpoints: ``(host, port)`` of each member's client URL, in the order given.
        root: The chroot path, ``"/"`` for none.
    """

    endpoints: list[tuple[str, int]]
    root: str


def is_etcd_url(url: str) -> bool:
    """Whether ``url`` names an etcd cluster (either spelling)."""
    return url.startswith(_SCHEME)


def parse_etcd_url(url: str) -> EtcdAddress:
    """Read an ``etcd://`` (or Pulsar's ``etcd:http://``) URL.

    Raises:
        ValueError: The URL is not an etcd URL, or an endpoint or the chroot is malformed.
    """
    if not is_etcd_url(url):
        raise ValueError(f"not an etcd URL: {url!r} (expected etcd://host:port[,host:port...])")
    rest = url[len(_SCHEME) :]
    if rest.startswith("//"):
        hosts, slash, root = rest[2:].partition("/")
        root = "/" + root if slash else "/"
        specs = hosts.split(",")
    else:  # Pulsar's form: a list of http:// URLs
        specs = []
        for item in rest.split(","):
            scheme, sep, hostport = item.partition("://")
            if not sep or scheme != "http":
                raise ValueError(
                    f"bad etcd endpoint {item!r} in {url!r}: expected http://host:port"
                )
            specs.append(hostport.rstrip("/"))
        root = "/"
    if root != "/":
        try:
            validate_path(root)
        except InvalidPathError as exc:
            raise ValueError(f"bad chroot in etcd URL {url!r}: {exc}") from exc
    return EtcdAddress([_endpoint(spec, url) for spec in specs], root)


def _endpoint(spec: str, url: str) -> tuple[str, int]:
    if spec.startswith("["):  # [::1]:2379
        host, _, port = spec[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = spec.partition(":")
    if not host:
        raise ValueError(f"empty etcd endpoint in {url!r}")
    if not port:
        return host, DEFAULT_ETCD_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port {port!r} in etcd URL {url!r}")
    return host, int(port)
