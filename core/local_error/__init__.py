"""--local-error: the error each node makes on its own, its inputs taken from the reference's values.

``keeper`` keeps what the measurement needs while the run goes (the reference's values and the feed of iteration 0,
in the run's scratch space; each pair's verdict per tensor); ``measure`` runs every node as a subgraph in the
workers of the backends compared against a reference, after the iterations and before the workers close.
"""
