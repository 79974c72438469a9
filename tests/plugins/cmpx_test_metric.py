"""A third-party metric: the number of elements whose sign differs from the reference's."""

import cmpx


class SignFlips:
    name = "signflips"
    threshold = 0.0  # at most this many flipped signs

    def compare(self, context):
        import numpy as np
        from cmpx import MetricResult

        flips = int(np.count_nonzero(np.sign(context.actual) != np.sign(context.reference)))
        limit = context.settings.thresholds.get(self.name, self.threshold)
        return MetricResult(self.name, flips <= limit, summary=f"{flips} sign flips", criterion=f"<= {limit:g}",
                            value=flips)


@cmpx.hookimpl
def register_metrics(registry):
    registry.add(SignFlips(), description="elements whose sign differs from the reference")
