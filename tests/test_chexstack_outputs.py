"""chexstack.outputs: output paths checked before the work (review finding 4)."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from chexstack.outputs import output_file, output_folder
from tests.lib.paths import REPO
from tests.lib.readonly import run_with_read_only


def test_output_file(tmp_path):
    assert output_file(tmp_path / "r.json", "--json") == tmp_path / "r.json"
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind
    with pytest.raises(ChexstackError, match="^--json .*/missing/r.json: folder .*/missing does not exist; create"):
        output_file(tmp_path / "missing" / "r.json", "--json")
    with pytest.raises(ChexstackError, match="^--json .*: is a folder; expected a file path$"):
        output_file(tmp_path, "--json")
    (tmp_path / "f").write_text("")
    with pytest.raises(ChexstackError, match="^--json .*/f/r.json: .*/f is not a folder$"):
        output_file(tmp_path / "f" / "r.json", "--json")
    assert output_file(tmp_path / "new" / "fig.png", "--output", create_folder=True) == tmp_path / "new" / "fig.png"
    assert (tmp_path / "new").is_dir()


def test_output_folder(tmp_path):
    assert output_folder(tmp_path / "a" / "b", "--output").is_dir()
    (tmp_path / "f").write_text("")
    with pytest.raises(ChexstackError, match="^--output .*/f: it is a file; expected a folder$"):
        output_folder(tmp_path / "f", "--output")
    with pytest.raises(ChexstackError, match=r"^--output .*/f/x: cannot create the folder \("):
        output_folder(tmp_path / "f" / "x", "--output")


def test_read_only_file_system_is_found_even_for_root(tmp_path):
    """Permission bits do not stop root; the probe (create a file) finds EROFS as the user's run would."""
    code = ("from chexstack.outputs import output_folder\n"
            "from chexstack.errors import ChexstackError\n"
            "try:\n    output_folder(%r, '--output')\nexcept ChexstackError as e:\n    print(e)\n" % str(tmp_path))
    p = run_with_read_only(tmp_path, [str(REPO / ".venv" / "bin" / "python"), "-c", code])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "--output %s: cannot write in %s (Read-only file system)" % (tmp_path, tmp_path), \
        p.stdout + p.stderr
