"""``cmpx reduce``: cut a failing model down to the smallest subgraph that still fails the same way.

``search`` decides which candidates to try (bisection of the end, then of the start, then a linear pass);
``candidates`` makes each one (the subgraph, and its inputs from the reference's values of the tensors at its
boundary); ``observe`` runs one in fresh workers and says how it failed; ``driver`` runs the whole reduction and
writes the result (the model, its inputs and the reference outputs as cmpx runs). ``cmpx.cli.reduce_cmd`` is its
command line.
"""
