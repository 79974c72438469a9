"""Shell completion (issue #30 item 9): paths for the model and every path option (the option table says which),
sweep and tensors files, transforms after ``--backend NAME:``; in bash, zsh and fish, and through a real bash."""

import os
import shutil
import subprocess
import sys

import pytest

from cmpx.options.table import RUN_OPTIONS
from conftest import REPO

CMPX = os.path.join(os.path.dirname(sys.executable), "cmpx")
EXAMPLE = "examples/models/conv.onnx"


def completions(shell: str, line: str) -> list[str]:
    """What cmpx answers a shell's completion call for the last word of ``line`` (click's protocol)."""
    words = line.split(" ")
    current = words[-1] if shell == "fish" else str(len(words) - 1)  # fish says the word itself, not its index
    env = dict(os.environ, _CMPX_COMPLETE=f"{shell}_complete", COMP_WORDS=line, COMP_CWORD=current)
    done = subprocess.run(["cmpx"], env=env, capture_output=True, text=True, cwd=REPO, executable=CMPX, timeout=60)
    assert done.returncode == 0, done.stderr
    if shell == "zsh":  # type, value, help: three lines each
        lines = done.stdout.splitlines()
        return [f"{kind},{value}" for kind, value in zip(lines[0::3], lines[1::3])]
    return [line for line in done.stdout.splitlines() if line]


def test_every_path_option_and_argument_completes_paths():
    for option in RUN_OPTIONS:
        if option.python == "path":
            kind = "dir" if option.metavar == "DIR" else "file"
            assert completions("bash", f"cmpx run {EXAMPLE} {option.flags[0]} out/x") == [f"{kind},out/x"], option
    assert completions("bash", "cmpx run exa") == ["file,exa"]
    assert completions("bash", f"cmpx run {EXAMPLE} --report-html rep") == ["file,rep"]
    assert completions("bash", "cmpx sweep exa") == ["file,exa"]
    assert completions("bash", "cmpx sweep s.toml --out res") == ["dir,res"]
    assert completions("bash", "cmpx tensors exa") == ["file,exa"]
    assert completions("bash", "cmpx reduce -o red") == ["file,red"]
    for shell in ("zsh", "fish"):
        assert completions(shell, f"cmpx run {EXAMPLE} --load-inputs in") == ["file,in"], shell


def transforms() -> list[str]:
    from cmpx.plugin.manager import make_plugin_manager

    return make_plugin_manager().transforms.names()


def test_transforms_complete_after_a_backends_name():
    expected = [f"plain,onnxrt:{name}" for name in transforms() if name.startswith("f")]
    assert "plain,onnxrt:fp16" in expected
    for shell in ("bash", "zsh", "fish"):
        assert completions(shell, f"cmpx run {EXAMPLE} --backend onnxrt:f") == expected, shell
    assert completions("bash", f"cmpx run {EXAMPLE} --backend nope:f") == []
    assert "plain,onnxrt" in completions("bash", f"cmpx run {EXAMPLE} --backend onn")


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_in_bash_itself(tmp_path):
    """bash splits 'onnxrt:f' at ':' (COMP_WORDBREAKS): the completion replaces only what follows it."""
    source = subprocess.run(["cmpx"], env=dict(os.environ, _CMPX_COMPLETE="bash_source"), capture_output=True,
                            text=True, executable=CMPX, timeout=60).stdout
    (tmp_path / "cmpx.bash").write_text(source)
    script = f"""source {tmp_path / "cmpx.bash"}
complete_line() {{
  COMP_LINE="$1"; COMP_POINT=${{#COMP_LINE}}
  read -ra COMP_WORDS <<< "$(sed 's/:/ : /g' <<< "$COMP_LINE")"
  [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMPREPLY=()
  _cmpx_completion cmpx; echo "${{COMPREPLY[*]}}"
}}
complete_line "cmpx run {EXAMPLE} --backend onnxrt:f"
complete_line "cmpx run {EXAMPLE} --backend onnxrt:"
complete_line "cmpx run {EXAMPLE} --backend onn"
"""
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(CMPX), os.environ["PATH"]]))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    names = transforms()
    assert done.stdout.splitlines() == [" ".join(n for n in names if n.startswith("f")),
                                        " ".join(f":{n}" for n in names), "onnxref onnxrt"], done.stderr
