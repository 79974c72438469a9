"""``cmpx sweep``: many models x many run configurations, each cell a full ``cmpx run``, locally in parallel or
on a Ray cluster, with resumable results (see docs/sweep.md). ``cmpx.sweep.driver.run_sweep`` runs one."""
