"""Plugin discovery: built-ins through entry points, -p modules, blocking, and isolated failures."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cmpx.errors import PluginError
from cmpx.hookspecs import hookimpl
from cmpx.plugin.manager import PluginSettings, make_plugin_manager
from cmpx.plugin.registry import BackendRegistry, Provenance
from conftest import REPO, run_cmpx


def test_builtins_come_from_the_cmpx_entry_point_group():
    plugins = make_plugin_manager()
    assert {"onnxrt", "onnxref"} <= set(plugins.backends.names())
    assert plugins.data_loaders.names() == ["saved", "script", "synthetic"]
    assert "elemwise" in plugins.metrics.names()
    onnxrt = plugins.backends.get("onnxrt")
    assert onnxrt.provenance.plugin == "onnxrt"
    assert onnxrt.provenance.dist.startswith("cmpx ")
    assert onnxrt.target == "cmpx_onnxrt.backend:OnnxrtBackend"
    assert plugins.failures == []


def test_without_autoload_nothing_is_registered_until_asked():
    assert len(make_plugin_manager(autoload=False).backends) == 0
    plugins = make_plugin_manager(autoload=False, extra=["cmpx_onnxrt.plugin"])
    assert plugins.backends.names() == ["onnxrt"]


def test_blocking_a_builtin_by_name():
    plugins = make_plugin_manager(blocked=["onnxref"])
    assert "onnxref" not in plugins.backends and "onnxrt" in plugins.backends


def test_a_module_that_does_not_import_is_reported_by_name():
    plugins = make_plugin_manager(extra=["cmpx_test_import_error"])
    [failure] = plugins.failures
    assert failure.plugin == "cmpx_test_import_error" and failure.requested
    assert "ModuleNotFoundError" in failure.error and "cmpx_this_module_does_not_exist" in failure.error
    assert "onnxrt" in plugins.backends


def test_a_misspelt_hook_is_reported_and_the_plugin_is_not_used():
    plugins = make_plugin_manager(extra=["cmpx_test_misspelt"])
    [failure] = plugins.failures
    assert "unknown hook(s) register_backend" in failure.error
    assert "never" not in plugins.backends and "onnxrt" in plugins.backends


def test_a_registration_that_raises_keeps_none_of_that_hooks_adds():
    plugins = make_plugin_manager(extra=["cmpx_test_raising"])
    [failure] = plugins.failures
    assert failure.plugin == "cmpx_test_raising"
    assert "register_backends: RuntimeError: registration exploded" in failure.error
    assert "halfway" not in plugins.backends
    assert "always" in plugins.metrics  # its other hook was fine


def test_a_name_clash_names_both_plugins_and_keeps_the_builtin():
    plugins = make_plugin_manager(extra=["cmpx_test_clash"])
    [failure] = plugins.failures
    assert "backend 'onnxrt' is registered by both plugin onnxrt (cmpx" in failure.error
    assert "plugin cmpx_test_clash" in failure.error
    assert plugins.backends.get("onnxrt").target == "cmpx_onnxrt.backend:OnnxrtBackend"


def test_plugin_objects_can_be_registered_directly():
    class Plugin:
        @hookimpl
        def register_backends(self, registry):
            registry.add("direct", "somewhere:Backend", description="d")

    plugins = make_plugin_manager(autoload=False, extra=[Plugin()])
    assert plugins.backends.get("direct").description == "d"


@pytest.mark.parametrize("name, target, message", [
    ("Bad Name", "a.b:C", "invalid backend name"),
    ("ok", "no_colon", "must look like 'package.module:ClassName'"),
    ("x#2", "a:B", "invalid backend name"),
])
def test_the_registry_validates_what_plugins_add(name, target, message):
    registry = BackendRegistry()
    with pytest.raises(PluginError, match=message):
        with registry.attributing(Provenance("p")):
            registry.add(name, target)


@pytest.mark.parametrize("formats", [("engine",), (".Engine",), (".onnx",), (".eng ine",), (3,)])
def test_model_formats_must_be_lower_case_suffixes_other_than_onnx(formats):
    registry = BackendRegistry()
    with pytest.raises(PluginError, match="must be a lower-case file suffix"):
        registry.add("ok", "a.b:C", model_formats=formats)


def test_a_flag_option_takes_no_values():
    from cmpx.plugin.registry import BackendOption

    registry = BackendRegistry()
    with pytest.raises(PluginError, match="option 'loud' is a flag; it takes no values"):
        registry.add("ok", "a.b:C", options=[BackendOption("loud", "h", is_flag=True, multiple=True)])


def test_an_option_type_is_str_int_or_float():
    from cmpx.plugin.registry import BackendOption

    registry = BackendRegistry()
    with pytest.raises(PluginError, match="option 'size' has type <class 'list'>; use str, int or float"):
        registry.add("ok", "a.b:C", options=[BackendOption("size", "h", type=list)])


def test_model_formats_are_kept_as_given():
    registry = BackendRegistry()
    registry.add("ok", "a.b:C", model_formats=".engine")
    registry.add("ok2", "a.b:C", model_formats=(".engine", ".plan"))
    assert registry.get("ok").model_formats == (".engine",)
    assert registry.get("ok2").model_formats == (".engine", ".plan")


def test_settings_combine_p_arguments_with_the_environment():
    settings = PluginSettings.from_cli(["b", "no:onnxref"], {"CMPX_PLUGINS": "a, b", "CMPX_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert settings == PluginSettings(autoload=False, extra=("a", "b"), blocked=("onnxref",))
    assert PluginSettings.from_message(settings.to_message()) == settings
    assert PluginSettings.from_cli([], {}).autoload is True


def fake_distribution(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_a_broken_installed_plugin_is_listed_and_breaks_nothing_else(tmp_path, no_leaks):
    site = tmp_path / "site"
    fake_distribution(site, "cmpx-broken", "[cmpx]\nbroken = cmpx_missing_module_xyz\n")
    env = {"PYTHONPATH": f"{site}:{REPO / 'tests' / 'plugins'}"}
    listed = run_cmpx("plugins", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "Failed plugins:" in listed.stdout
    assert "broken (cmpx-broken 1.0): ModuleNotFoundError" in listed.stdout
    assert "onnxrt" in listed.stdout
    ran = run_cmpx("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref", env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_an_installed_third_party_backend_is_found_through_its_entry_point(tmp_path, no_leaks):
    site = tmp_path / "site"
    fake_distribution(site, "cmpx-mine", "[cmpx]\nmine = cmpx_test_minimal\n")
    env = {"PYTHONPATH": f"{site}:{REPO / 'tests' / 'plugins'}"}
    listed = run_cmpx("plugins", env=env)
    assert "[plugin mine (cmpx-mine 1.0)]" in listed.stdout
    ran = run_cmpx("run", "examples/models/conv.onnx", "--backend", "mine", "--backend", "onnxrt", env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_disabling_autoload_leaves_only_what_p_loads():
    done = run_cmpx("-p", "cmpx_onnxref.plugin", "plugins", env={"CMPX_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "onnxref" in done.stdout and "onnxrt " not in done.stdout


def test_tracing_shows_hook_calls():
    done = run_cmpx("plugins", env={"CMPX_TRACE_PLUGINS": "1"})
    assert "[cmpx trace] register_backends -> onnxrt" in done.stderr


def test_requested_plugin_that_fails_is_a_usage_error(run_cli):
    result = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "-p", "cmpx_test_import_error")
    assert result.exit_code == 2
    assert "plugin 'cmpx_test_import_error' (from -p / CMPX_PLUGINS) failed to load" in result.output


@pytest.mark.parametrize("argv", [["--help"], ["plugins"], ["run", "--help"], ["run", "m.onnx", "--backend", "x"]])
def test_help_plugins_and_option_errors_import_no_framework(argv):
    code = textwrap.dedent(f"""
        import sys
        from cmpx.cli.main import cli
        cli.main({argv!r}, standalone_mode=False)
        heavy = [m for m in ("numpy", "onnx", "onnxruntime", "onnx.reference", "tensorrt", "openvino")
                 if m in sys.modules]
        print("HEAVY", heavy)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr


def hook_names():
    import cmpx.hookspecs as specs

    return [name for name, value in vars(specs).items() if callable(value) and hasattr(value, "cmpx_spec")]


def test_every_hook_is_documented_in_the_plugin_guide_and_its_summary():
    hooks = hook_names()
    assert {"register_backends", "register_data_loaders", "register_metrics"} <= set(hooks)
    guide = (REPO / "docs" / "plugins.md").read_text()
    summary = guide[guide.index("## In short"):guide.index("## 1. ")]  # what the README held before docs/
    for hook in hooks:
        assert f"### `{hook}(registry)`" in guide, hook
        assert f"{hook}(" in summary, hook


def test_every_package_directory_is_packaged():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {name: REPO / path for name, path in project["package-dir"].items()}
    found = set()
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root)
            found.add(".".join([name, *relative.parts]))
    assert found == set(project["packages"])


def test_discovery_falls_back_to_importlib_metadata_with_the_same_result(monkeypatch):
    from cmpx.plugin import installed

    fast = make_plugin_manager()
    monkeypatch.setattr(installed, "_info_folders", lambda paths: None)  # as where the reader cannot tell
    slow = make_plugin_manager()
    for kind in ("backends", "data_loaders", "metrics", "transforms"):
        assert [(s.name, str(s.provenance)) for s in getattr(slow, kind)] == \
               [(s.name, str(s.provenance)) for s in getattr(fast, kind)]
    assert "onnxrt (cmpx 0.1.0)" in [str(s.provenance) for s in slow.backends]
