"""Every parser of user files and words, fuzzed (issue #28, item 14): whatever the input, it is read or refused
with a one-line usage error (exit 2); never another exception, exit 4, or a file opened outside the input's
directory. CI runs a bounded number of examples per reader; bench/fuzz_readers.py runs 10,000 each."""

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings

from cmpx.testing.fuzzing import READERS, mutations, outcome

EXAMPLES = int(os.environ.get("CMPX_FUZZ_EXAMPLES", "60"))


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_the_valid_seed_is_read(reader, tmp_path):
    assert outcome(reader, reader.seed(), str(tmp_path)) == "read"  # the mutations start from a valid file


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_any_input_is_read_or_refused_in_one_line(reader):
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutations(reader.seed()))
    def check(data):
        directory = tempfile.mkdtemp(prefix="cmpx-fuzz-")
        try:
            outcome(reader, data, directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    check()


def test_a_file_opened_outside_the_inputs_directory_is_a_defect(tmp_path):
    """The check itself can fail: a manifest entry leading outside is refused by cmpx (so the reader passes),
    while a reader that opens such a file is caught."""
    from cmpx.testing.fuzzing import Reader

    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    inside = tmp_path / "in"
    inside.mkdir()
    nosy = Reader("nosy", lambda: b"", lambda data, directory: open(outside).read())
    with pytest.raises(AssertionError, match="outside"):
        outcome(nosy, b"", str(inside))
