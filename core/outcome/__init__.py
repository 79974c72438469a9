"""What a run found, as data: per-metric results aggregated per pair, what the fp64 oracle found, the report's data (cmpx.report adds its renderings), and where each backend ran."""
