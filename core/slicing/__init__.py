"""Sliced execution of a marked run: when the marked tensors of every live backend would not fit the memory
budget (--memory-budget), the graph is cut into topological slices run one after another.

``cuts`` decides the slices (pure: grouping by estimated bytes, the nodes of each slice in each backend's model,
how long each tensor crossing a cut is kept); ``planning`` types the model with the run's input shapes, applies
the budget and writes each slice's model (cmpx.model.subgraph); ``runner`` runs an iteration slice by slice in the
workers, each fed its own values of the tensors crossing the cuts, comparing each slice's tensors and freeing
their shared memory before the next slice runs.
"""
