"""``cmpx precision``: the fewest nodes to keep in float32 (fp16, bf16) or out of quantization (int8, fp8) so that
the reduced-precision model passes its tolerances.

``nodes`` says which nodes may be kept, writes the list and measures its share of the weights; ``ranking`` orders
them, most suspect first (first divergence, local error); ``search`` decides which sets to try (grow along the
ranking, shrink by delta debugging, check each kept node is needed); ``driver`` runs each set as a whole run in
fresh workers (cmpx.reduce.observe); ``result`` writes and checks what was found. ``cmpx.cli.precision_cmd`` is
its command line.
"""
