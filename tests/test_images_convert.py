"""Dockerfile -> Singularity conversion: the four converter faults of ../shared/cases/09-12, each input producing
exactly the correct output its expected.md gives."""
from __future__ import annotations

import re

import pytest

from chexstack.errors import ChexstackError
from images.convert import convert, substitute
from tests.conftest import CASES
from tests.golden import assert_golden


def _case(n: str) -> str:
    return str(next(CASES.glob("%s-*.Dockerfile" % n)))


def _expected_blocks(n: str) -> list[str]:
    """The fenced blocks under '## Correct ...' in the case's expected.md."""
    text = next(CASES.glob("%s-*.expected.md" % n)).read_text()
    correct = re.split(r"^## Correct.*$", text, flags=re.M)[1].split("\n## ")[0]
    return re.findall(r"```\n(.*?)```", correct, re.S)


def test_09_arg_in_from_resolved():
    text = convert(_case("09")).text
    assert _expected_blocks("09")[0] in text  # "Bootstrap: docker\nFrom: nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04\n"
    assert all("$" not in l for l in text.splitlines() if l.startswith("From:"))
    # as in Docker, ARGs before FROM are not in the stage's environment
    assert "CUDA_VERSION=" not in text.split("%post")[1]


def test_09_arg_without_default_needs_a_value(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("ARG CUDA_VERSION\nFROM nvidia/cuda:${CUDA_VERSION}-cudnn8-devel-ubuntu20.04\nRUN true\n")
    with pytest.raises(ChexstackError, match=r"ARG CUDA_VERSION has no value.*--build-arg CUDA_VERSION="):
        convert(df)
    text = convert(df, {"CUDA_VERSION": "11.8.0"}).text
    assert "From: nvidia/cuda:11.8.0-cudnn8-devel-ubuntu20.04\n" in text


def test_10_env_exported_during_post():
    text = convert(_case("10")).text
    environment, post_start = _expected_blocks("10")
    assert environment.replace("%environment must contain one export per pair, quotes preserved:\n", "") in text
    # "%post\n. /.singularity.d/env/10-docker*.sh\nexport HOROVOD_GPU_OPERATIONS=NCCL\nexport HOROVOD_WITH_TENSORFLOW=1\n..."
    post = text.split("%post\n", 1)[1].split("%environment")[0]
    head = [l for l in post_start.splitlines()[1:] if l != "..." and not l.startswith("apt-get")]
    assert post.splitlines()[: len(head)] == head
    exports = [l for l in post.splitlines() if l.startswith("export ")]
    assert exports == ["export " + l.split("export ", 1)[1] for l in environment.strip().splitlines()]
    assert post.index("export LABELS_FILE=") < post.index("apt-get update")
    assert "pip3 install --no-cache-dir horovod==0.28.1" in post


def test_11_copy_into_workdir():
    text = convert(_case("11")).text
    assert _expected_blocks("11")[0] in text
    # the destination exists before %files copies into it
    assert "%setup\nmkdir -p ${SINGULARITY_ROOTFS}/opt/chexnet\n%files\n" in text


def test_12_user_never_su_dash():
    result = convert(_case("12"))
    text = result.text
    assert "# USER trainer (ignored: Singularity/Apptainer runs as the invoking host user)" in text
    assert "su trainer -c 'echo \"running as $(whoami)\" && touch /workspace/owned-by-trainer'" in text
    assert "useradd -m ${NB_USER} && mkdir -p /workspace && chown -R ${NB_USER} /workspace" in text  # untouched
    assert not re.search(r"^\s*su\s+-", text, re.M)
    assert any("USER trainer" in w for w in result.warnings)


@pytest.mark.parametrize("n", ["09", "10", "11", "12"])
def test_golden_conversions(n):
    assert_golden("images/convert-%s.def" % n, convert(_case(n)).text)


def test_substitute_forms():
    assert substitute("a${X}b$Y${Z:-z}", {"X": "1", "Y": "2"}) == ("a1b2z", [])
    assert substitute("${NOPE}", {}) == ("${NOPE}", ["NOPE"])
    assert substitute("$CUDA_VERSION", {"CUDA": "x", "CUDA_VERSION": "11"}) == ("11", [])


def test_multiline_run_after_user_is_one_command(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:20.04\nUSER alice\nRUN echo a && \\\n    echo b\nUSER root\nRUN id\n")
    text = convert(df).text
    assert "su alice -c 'echo a && echo b'" in text
    assert "\nid\n" in text


@pytest.mark.parametrize("text, message", [
    ("", "no FROM instruction"),
    ("just some words\n", ":1: just some words: not a Dockerfile instruction"),
    ("FROM debian:12\nRUN true\n\nBOGUS thing\n", ":4: BOGUS thing: not a Dockerfile instruction"),
    ('FROM debian:12\nSHELL ["/bin/bash", "-c"]\n', ":2: SHELL"),
])
def test_not_a_dockerfile_is_an_error_naming_the_line(tmp_path, text, message):
    """spython exits 1 without a word on a file with no FROM, and copies unknown lines into %post."""
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    with pytest.raises(ChexstackError, match=re.escape(message)):
        convert(path)


def test_build_arg_needs_a_value():
    from images.convert import parse_build_args

    assert parse_build_args(["CUDA_VERSION=11.8.0", "EMPTY="]) == {"CUDA_VERSION": "11.8.0", "EMPTY": ""}
    with pytest.raises(ChexstackError, match="expected NAME=VALUE"):
        parse_build_args(["CUDA_VERSION"])
