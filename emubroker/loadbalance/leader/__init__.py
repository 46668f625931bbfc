"""The leader: its election (``election``) and its tasks while it leads (``tasks``).

The tasks run on the shared runtime (``loadbalance.runtime``) and ask the load manager
``loadManagerClassName`` names (``loadbalance.load_managers``) where the two managers differ.
"""
