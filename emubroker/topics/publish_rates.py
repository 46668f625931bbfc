"""The periodic publish-rate update that relative-to-publish-rate dispatch limits read.

Pulsar's periodic topic stats update, as far as dispatch limits need it: every
``statsUpdateFrequencyInSecs`` each loaded persistent topic's publish rates over the last
interval are folded into the smoothed rates the throttling keeps for it (spec/pulsar-behaviour.md
§1.1). A topic seen for the first time starts from its current totals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.naming import TopicName
    from emubroker.topics.catalog import TopicCatalog
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.throttling import DispatchThrottling
    from protocol.clock import Clock

__all__ = ["PublishRates"]


class PublishRates:
    """Feeds the topics' publish rates to dispatch throttling (see the module docstring).

    Args:
        catalog: The loaded topics and their counters.
        throttling: Where the rates go.
        settings: The current topic settings (the period).
        clock: Time for the period.
    """

    def __init__(
        self,
        catalog: TopicCatalog,
        throttling: DispatchThrottling,
        *,
        settings: Callable[[], TopicSettings],
        clock: Clock,
    ) -> None:
        self._catalog = catalog
        self._throttling = throttling
        self._settings = settings
        self._clock = clock

    async def run(self) -> None:
        """Update every period until cancelled."""
        catalog, throttling = self._catalog, self._throttling
        last: dict[TopicName, tuple[int, int]] = {}
        while True:
            interval = self._settings().stats_update_frequency
            await self._clock.sleep(interval)
            seen: dict[TopicName, tuple[int, int]] = {}
            for name in list(catalog.loaded):
                state = catalog.states.get(name)
                rates = throttling.publish_rate(name)
                if state is None or rates is None:
                    continue
                now = seen[name] = (state.counters.msg_in, state.counters.bytes_in)
                before = last.get(name, now)
                rates.update((now[0] - before[0]) / interval, (now[1] - before[1]) / interval)
            last = seen
