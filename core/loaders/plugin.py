"""Registers the built-in data loaders, exactly as a third-party plugin would."""

from cmpx.hookspecs import hookimpl


def synthetic(options):
    """Factory for the synthetic loader; imports numpy only when data is actually made."""
    from cmpx.loaders.synthetic import SyntheticDataLoader

    return SyntheticDataLoader(options)


def saved(options):
    from cmpx.loaders.saved import SavedDataLoader

    return SavedDataLoader(options)


def script(options):
    from cmpx.loaders.script import ScriptDataLoader

    return ScriptDataLoader(options)


@hookimpl
def register_data_loaders(registry):
    registry.add("synthetic", synthetic, generates=True, default=True,
                 description="seeded uniform random inputs (--seed, --iterations, --val-range)")
    registry.add("saved", saved, selected_by="load_inputs",
                 description="saved inputs (--load-inputs): cmpx runs, Polygraphy JSON, ONNX test-data directories")
    registry.add("script", script, selected_by="data_loader_script",
                 description="a Python generator of feeds (--data-loader-script file.py[:func])")
