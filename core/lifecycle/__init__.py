"""A run's lifecycle: the session that owns it, the checks before it (preflight, planner) and the execution of the plan they produce (cmpx.plan, which the layers below read)."""
