"""The cluster dashboard: the page every broker serves at ``/dashboard/``, and run replays.

``model`` turns load-balancer trace rows into the page's JSON (pure); ``assets`` serves the
page's own HTML, CSS and JavaScript from package data; ``replay`` rebuilds a recorded run's state
at any moment from its Parquet traces; ``cli`` is ``emubroker dashboard RUN_DIR``.
See docs/dashboard.md.
"""
