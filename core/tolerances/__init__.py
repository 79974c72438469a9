"""Tolerances measured from a model's own noise (cmpx tolerances): the method, the measurement from saved runs, and the tolerance file that --tolerances reads."""
