"""A bad sweep file, or a run's bad cmpx run arguments, is exit 2 with one line naming the file, the line, the key
or run and the problem, before any cell runs (nothing is written to --out)."""

import pytest

from cmpx.sweep.matrix import cells, check_runs
from cmpx.sweep.sweepfile import read_sweep_file
from sweep_zoo import write_zoo



def run(*extra: str) -> str:
    words = ", ".join(f'"{w}"' for w in ("--backend", "onnxrt", "--backend", "onnxref", *extra))
    return f'[[runs]]\nname = "ref"\nargs = [{words}]\n'


RUN = run()

BAD_FILES = [
    ('modles = ["zoo/*.onnx"]\n' + RUN, "sweep.toml:1: modles: unknown key; did you mean 'models'?"),
    (RUN, "sweep.toml: models: missing"),
    ('models = ["zoo/*.onnx", "nowhere/*.onnx"]\n' + RUN, "sweep.toml:1: models: 'nowhere/*.onnx' matches no file"),
    ('models = "zoo/*.onnx"\n', "sweep.toml: runs: missing"),
    ('models = "zoo/*.onnx"\n' + RUN + RUN, "sweep.toml:6: runs[1].name: 'ref' is the name of another run too"),
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "a b"\nargs = []\n', "sweep.toml:3: runs[0].name: missing or not a name"),
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "a"\n', "sweep.toml:2: runs[0].args: missing"),
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "a"\nargs = [1]\n', "sweep.toml:4: runs[0].args: must be a list of "
                                                                   "strings"),
    ('models = "zoo/*.onnx"\n' + RUN + 'resources = {GPU = "one"}\n', "sweep.toml:5: runs[0].resources: GPU = 'one'"),
    ('models = "zoo/*.onnx"\n[defaults]\nargz = []\n' + RUN, "sweep.toml:3: defaults.argz: unknown key"),
    ('models = "zoo/*.onnx"\n' + RUN + 'threads = 0\n', "sweep.toml:5: runs[0].threads: must be a whole number of "
                                                        "threads >= 1, got 0"),
    ('models = "zoo/*.onnx"\n[defaults]\nthreads = "2"\n' + RUN, "sweep.toml:3: defaults.threads: must be a whole"),
    ('models = "zoo/*.onnx"\n' + RUN + 'threads = 100000\n', "runs[0].threads: 100000 threads: at most 1024"),
    ('models = "zoo/*.onnx"\nruns = [\n', "sweep.toml: invalid TOML: "),
    # the runs' args, parsed by cmpx run's own command and preflight
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "x"\nargs = "--backend onnxrt --bogus"\n',
     "sweep.toml:2: runs[0] 'x': No such option '--bogus'"),
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "x"\nargs = "--backend onnxrt --backend nope"\n',
     "sweep.toml:2: runs[0] 'x': unknown backend 'nope'"),
    ('models = "zoo/*.onnx"\n[defaults]\nargs = ["--atol", "big"]\n' + RUN,
     "sweep.toml:4: runs[0] 'ref': --atol"),
    ('models = "zoo/*.onnx"\n[[runs]]\nname = "x"\nargs = "other.onnx --backend onnxrt"\n',
     "sweep.toml:2: runs[0] 'x': args name a model (other.onnx)"),
    ('models = "zoo/*.onnx"\n' + run("--report-json", "r.json"),
     "runs[0] 'ref': --report-json is written by cmpx sweep"),
    ('models = "zoo/*.onnx"\n' + run("--save-outputs", "golden"),
     "runs[0] 'ref': --save-outputs golden would be written by the cell of every model; put {model} in the path"),
]


@pytest.mark.parametrize("text, message", BAD_FILES)
def test_a_bad_sweep_file_is_exit_2_with_the_line_and_the_key(tmp_path, run_cli, text, message):
    sweep = write_zoo(tmp_path, names=("conv", "gather"))
    sweep.write_text(text)
    result = run_cli("sweep", sweep, "--out", tmp_path / "out")
    assert result.exit_code == 2
    error = result.output.strip()
    assert "\n" not in error and error.startswith("Error: ") and message in error, error
    assert not (tmp_path / "out").exists()


def test_paths_per_model_and_relative_paths_are_accepted(tmp_path):
    sweep = write_zoo(tmp_path, names=("conv", "gather"))
    sweep.write_text('models = ["zoo/*.onnx", "zoo/conv.onnx"]\n[defaults]\nargs = "--iterations 2"\n' + run(
        "--save-outputs", "golden/{model}") + "resources = {GPU = 1, memory = 2e9}\n")
    read = read_sweep_file(str(sweep))
    assert [read.label(m) for m in read.models] == ["zoo/conv.onnx", "zoo/gather.onnx"]  # found once each
    assert read.runs[0].words[:2] == ("--iterations", "2") and read.runs[0].words[-1] == "golden/{model}"
    assert read.runs[0].resources == {"GPU": 1.0, "memory": 2e9}
    matrix = cells(read, check_runs(read))
    assert [cell.words[-1] for cell in matrix] == ["golden/zoo/conv", "golden/zoo/gather"]  # {model} filled in
    assert len({cell.key for cell in matrix}) == 2


def test_a_runs_threads_are_given_or_the_cpus_its_cells_reserve(tmp_path):
    sweep = write_zoo(tmp_path, names=("conv",))
    sweep.write_text('models = "zoo/*.onnx"\n[defaults]\nthreads = 3\n' + RUN.replace('"ref"', '"given"')
                     + RUN.replace('"ref"', '"own"') + "threads = 2\nresources = {CPU = 4}\n")
    assert [r.threads for r in read_sweep_file(str(sweep)).runs] == [3, 2]
    sweep.write_text('models = "zoo/*.onnx"\n' + RUN + RUN.replace('"ref"', '"cpus"') + "resources = {CPU = 1.5}\n")
    assert [r.threads for r in read_sweep_file(str(sweep)).runs] == [1, 2]


def test_a_missing_sweep_file_and_bad_options(tmp_path, run_cli):
    missing = run_cli("sweep", tmp_path / "none.toml", "--out", tmp_path / "out")
    assert missing.exit_code == 2 and "none.toml: No such file or directory" in missing.output
    sweep = write_zoo(tmp_path, names=("conv",))
    address = run_cli("sweep", sweep, "--out", tmp_path / "out", "--ray-address", "ray://x:10001")
    assert address.exit_code == 2 and "--ray-address is for --executor ray" in address.output
    shipped = run_cli("sweep", sweep, "--out", tmp_path / "out", "--ship-models")
    assert shipped.exit_code == 2 and "--ship-models is for --executor ray" in shipped.output
    assert run_cli("sweep", sweep, "--out", tmp_path / "out", "--jobs", "0").exit_code == 2
    pending = run_cli("sweep", sweep, "--out", tmp_path / "out", "--pending-timeout", "5")
    assert pending.exit_code == 2 and "--pending-timeout is for --executor ray" in pending.output
    assert run_cli("sweep", sweep, "--out", tmp_path / "out", "--executor", "ray", "--pending-timeout",
                   "-1").exit_code == 2


def test_a_glob_that_leads_outside_the_sweep_files_directory_through_a_link_is_refused(tmp_path):
    """Issue #28, item 12: a relative glob reached models outside the sweep file's directory through a symbolic
    link; such a path is swept only when written so explicitly (absolute, or with '..')."""
    import os

    import pytest

    from cmpx.errors import UsageError
    from cmpx.sweep.sweepfile import read_sweep_file
    from cmpx.testing import models as modelgen

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    modelgen.save(modelgen.conv_model(), elsewhere / "secret.onnx")
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    modelgen.save(modelgen.conv_model(), zoo / "mine.onnx")
    os.symlink(elsewhere, zoo / "linked")
    runs = '[[runs]]\nname = "ref"\nargs = ["--backend", "onnxrt"]\n'
    sweep = zoo / "zoo.toml"
    sweep.write_text('models = ["**/*.onnx"]\n' + runs)
    with pytest.raises(UsageError, match="leads outside the sweep file's directory .through a symbolic link"):
        read_sweep_file(str(sweep))
    sweep.write_text('models = ["*.onnx", "../elsewhere/*.onnx"]\n' + runs)  # written explicitly: allowed
    assert [os.path.basename(m) for m in read_sweep_file(str(sweep)).models] == ["mine.onnx", "secret.onnx"]
