"""cmpx.plugin.installed reads installed distributions and entry points as the packaging specifications define them
(no importlib.metadata import on the hot path). It must agree with importlib.metadata wherever it answers."""

import sys
import zipfile
from importlib import metadata

import pytest

from cmpx.plugin import installed


def _normalized(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def test_it_finds_what_importlib_metadata_finds_in_this_environment():
    ours = installed.distributions()
    assert ours is not None  # plain site-packages directories: nothing to fall back for
    theirs = {}
    for dist in metadata.distributions():
        theirs.setdefault(_normalized(dist.metadata["Name"]), dist.version)  # the first one on sys.path wins
    assert {_normalized(d.name): d.version for d in ours} == theirs


@pytest.mark.parametrize("group", ["cmpx", "console_scripts", "pytest11"])
def test_entry_points_agree_with_importlib_metadata(group):
    ours = {(ep.name, ep.value, _normalized(ep.dist.name)) for ep in installed.entry_points(group)}
    theirs = {(ep.name, ep.value, _normalized(ep.dist.metadata["Name"])) for ep in metadata.entry_points(group=group)}
    assert ours == theirs and ours


def _dist(directory, folder, name, version, entry_points=None, metadata_file="METADATA"):
    info = directory / folder
    info.mkdir(parents=True)
    (info / metadata_file).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not a header\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)
    return info


def test_the_first_distribution_of_a_name_wins_and_sections_are_read_as_ini(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    _dist(first, "my_plugin-1.0.dist-info", "My.Plugin", "1.0",
          "# comment\n[cmpx]\nmine = my_plugin.register  [extra]\n; another comment\n[other]\nx = y:z\n")
    _dist(second, "My_Plugin-2.0.dist-info", "my-plugin", "2.0", "[cmpx]\nmine = shadowed:plugin\n")
    _dist(second, "legacy.egg-info", "legacy", "0.3", "[cmpx]\nold = legacy_mod:plug\n", metadata_file="PKG-INFO")
    paths = [str(tmp_path / "missing"), str(first), str(second)]
    found = {(ep.name, ep.value, ep.dist.name, ep.dist.version) for ep in installed.entry_points("cmpx", paths)}
    assert found == {("mine", "my_plugin.register  [extra]", "My.Plugin", "1.0"), ("old", "legacy_mod:plug", "legacy",
                                                                                    "0.3")}
    assert installed.version(["nope", "my-plugin"], paths) == "1.0"
    assert installed.version(["nope"], paths) is None


def test_the_current_directory_is_the_empty_path_entry(tmp_path, monkeypatch):
    _dist(tmp_path, "here-0.1.dist-info", "here", "0.1", "[cmpx]\nhere = here_mod\n")
    monkeypatch.chdir(tmp_path)
    assert [ep.name for ep in installed.entry_points("cmpx", [""])] == ["here"]


def test_entry_points_load_modules_and_attributes():
    dist = installed.Distribution("x", "1", "/nowhere")
    assert installed.EntryPoint("a", "os.path:join", dist).load() is __import__("os").path.join
    assert installed.EntryPoint("b", "cmpx.plugin.installed", dist).load() is installed
    assert installed.EntryPoint("c", "cmpx.plugin:installed.version [extra]", dist).load() is installed.version
    with pytest.raises(ValueError, match="is not module:attr"):
        installed.EntryPoint("d", "not a reference!", dist).load()


def test_what_it_cannot_read_is_left_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
    assert installed.distributions([str(archive)]) is None
    egg = tmp_path / "old.egg"
    egg.mkdir()
    assert installed.distributions([str(egg)]) is None

    class CustomFinder:
        def find_distributions(self, context=None):
            return iter(())

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, CustomFinder()])
    assert installed.distributions() is None
    assert {ep.name for ep in installed.entry_points("cmpx")} >= {"onnxrt", "metrics"}  # read by importlib.metadata
    assert installed.version(["pytest"]) == metadata.version("pytest")  # answered by importlib.metadata
