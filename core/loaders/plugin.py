"""Registers the built-in data loaders, exactly as a third-party plugin would."""

from cmpx.hookspecs import hookimpl


def synthetic(options):
    """Factory for the synthetic loader; imports numpy only when data is actually made."""
    from cmpx.loaders.synthetic import SyntheticDataLoader

    return SyntheticDataLoader(options)


@hookimpl
def register_data_loaders(registry):
    registry.add("synthetic", synthetic,
                 description="seeded uniform random inputs (--seed, --iterations, --val-range)")
