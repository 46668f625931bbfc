"""The errors of authentication and authorization.

* :class:`SecurityConfigError`: the TLS or auth settings cannot be used (a key file is missing,
  a provider class is unknown); start-up stops with the message, which names the setting.
* :class:`AuthenticationFailed`: a client's credentials were refused. The reason is for the
  broker's log only: clients learn no more than Pulsar tells them ("Failed to authenticate" on
  the wire, "Authentication required" over REST), so a probe learns nothing about which part of
  a credential was wrong.
"""

from __future__ import annotations

from emubroker.config import ConfigError

__all__ = ["AuthenticationFailed", "SecurityConfigError"]


class SecurityConfigError(ConfigError):
    """A TLS or authentication setting cannot be used."""


class AuthenticationFailed(Exception):
    """Credentials were refused; ``str(exc)`` is the reason for the log."""
