"""Dockerfile -> Singularity definition (``invoke convert``): ../shared/cases 09-12, 27, 28 and the corpus.

The corpus: every ``tests/data/convert/*.Dockerfile`` (and the case 27/28 Dockerfiles) converts to exactly
``tests/golden/convert/<name>.def`` or is refused with exactly ``<name>.refused`` (the message after the file
name: line, instruction, why). Regenerate with ``CHEXSTACK_UPDATE_GOLDEN=1`` and review. The same pairs are built
and run both ways by ``tests/test_images_equivalence.py``.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from chexstack.errors import ChexstackError
from images.convert import _simple, convert, parse_build_args
from images.dockerwords import UnsupportedExpansion, literal, shell, words
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden
from tests.lib.paths import CASES, CONVERT_CORPUS

SHARED_PAIRS = ["27-spython-add-url-and-local-tarball", "28-dockerfile-buildkit-syntax-heredoc",
                "28-dockerfile-buildkit-syntax-run-mount"]


def corpus() -> list[Path]:
    """Every corpus Dockerfile: ours, then the shared cases that are part of it."""
    return sorted(CONVERT_CORPUS.glob("*.Dockerfile")) + [CASES / ("%s.Dockerfile" % n) for n in SHARED_PAIRS]


def _case(n: str) -> str:
    return str(next(CASES.glob("%s-*.Dockerfile" % n)))


def _expected_blocks(n: str) -> list[str]:
    """The fenced blocks under '## Correct ...' in the case's expected.md."""
    text = next(CASES.glob("%s-*.expected.md" % n)).read_text()
    correct = re.split(r"^## Correct.*$", text, flags=re.M)[1].split("\n## ")[0]
    return re.findall(r"```\n(.*?)```", correct, re.S)


@pytest.mark.parametrize("dockerfile", corpus(), ids=lambda p: p.name.replace(".Dockerfile", ""))
def test_corpus_pair(dockerfile: Path):
    name = dockerfile.name.replace(".Dockerfile", "")
    if name.startswith("refuse-"):
        with pytest.raises(ChexstackError) as e:
            convert(dockerfile)
        message = str(e.value)
        assert message.startswith(str(dockerfile))
        assert_golden("convert/%s.refused" % name, message[len(str(dockerfile)):] + "\n")
    else:
        assert_golden("convert/%s.def" % name, convert(dockerfile).text)


def _post(text: str) -> str:
    return text.split("%post\n", 1)[1].split("\n%environment")[0]


def test_09_arg_in_from_resolved():
    text = convert(_case("09")).text
    assert _expected_blocks("09")[0] in text  # "Bootstrap: docker\nFrom: nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04\n"
    assert all("$" not in l for l in text.splitlines() if l.startswith("From:"))
    assert "CUDA_VERSION=" not in _post(text)  # as in Docker, ARGs before FROM are not in the stage


def test_09_arg_without_default_needs_a_value(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("ARG CUDA_VERSION\nFROM nvidia/cuda:${CUDA_VERSION}-cudnn8-devel-ubuntu20.04\nRUN true\n")
    with pytest.raises(ChexstackError, match=r":2: FROM .*ARG CUDA_VERSION has no value.*--build-arg CUDA_VERSION="):
        convert(df)
    text = convert(df, {"CUDA_VERSION": "11.8.0"}).text
    assert "From: nvidia/cuda:11.8.0-cudnn8-devel-ubuntu20.04\n" in text


def test_10_env_exported_during_post_and_at_run_time():
    text = convert(_case("10")).text
    environment, post_start = _expected_blocks("10")
    environment = environment.replace("%environment must contain one export per pair, quotes preserved:\n", "")
    assert "%environment\n" + environment in text
    post = _post(text).splitlines()
    assert post[0] == post_start.splitlines()[1] == ". /.singularity.d/env/10-docker*.sh"
    assert post[1:7] == environment.strip().splitlines()
    # the RUN is one `sh -c` command: under `sh -e`, `apt-get update && ...` inline would not stop a failed build
    assert post[7].startswith("/bin/sh -c 'apt-get update && apt-get install")
    assert post[7].endswith("pip3 install --no-cache-dir horovod==0.28.1'")


def test_11_copy_into_workdir():
    result = convert(_case("11"))
    post = _post(result.text)
    # each source goes to the WORKDIR folder (expected.md: /opt/chexnet/), put in place at its position in %post
    assert "%files\ntrain.py /.chexstack-copy-3-1/train.py\nlabels.csv /.chexstack-copy-3-2/labels.csv\n" in result.text
    assert ("mkdir -p /opt/chexnet\ncd /opt/chexnet\nchexstack_copy /.chexstack-copy-3-1/train.py /opt/chexnet/\n"
            "chexstack_copy /.chexstack-copy-3-2/labels.csv /opt/chexnet/\n"
            "chexstack_copy /.chexstack-copy-3-3/environment.yml /opt/chexnet/\n"
            "ls -l /opt/chexnet/train.py /opt/chexnet/labels.csv /opt/chexnet/environment.yml") in post
    assert any("source train.py is not in the build context" in w for w in result.warnings)


def test_12_user_never_su_dash():
    result = convert(_case("12"))
    text = result.text
    assert "chexstack_as trainer /bin/sh -c 'echo \"running as $(whoami)\" && touch /workspace/owned-by-trainer'" \
        in text
    assert "setpriv --reuid=\"$u\" --regid=\"$g\" $groups" in text
    assert "useradd -m ${NB_USER} && mkdir -p /workspace && chown -R ${NB_USER} /workspace" in text  # untouched
    assert not re.search(r"^\s*su\s+-", text, re.M)
    assert any("USER trainer" in w and "invoking host user" in w for w in result.warnings)


@pytest.mark.parametrize("n", ["09", "10", "11", "12"])
def test_golden_conversions(n):
    assert_golden("images/convert-%s.def" % n, convert(_case(n)).text)


def test_27_add_url_and_local_tarball():
    text = convert(_case("27")).text
    assert "curl -fsSL --retry 3 -R -o \"$f\" \"$1\"" in text and "wget -q -O" in text
    assert "chexstack_fetch https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.13.8.tar.gz /opt/\n" in text
    assert "%files\nhorovod-0.16.2.tar.gz /.chexstack-copy-5-1/horovod-0.16.2.tar.gz\n" in text
    assert "chexstack_add /.chexstack-copy-5-1/horovod-0.16.2.tar.gz /opt/src/\n" in text
    assert 'mkdir -p "$2" && tar -xf "$1" -C "$2"' in text
    assert "tar -zvf" not in text and not re.search(r"^curl \S+ -o", text, re.M)


def test_28_run_mount_and_heredoc():
    mount = convert(next(CASES.glob("28-*-run-mount.Dockerfile")))
    post = _post(mount.text)
    assert not [l for l in post.splitlines() if "--mount" in l.split("#")[0]]
    assert ("chexstack_mount /root/.cache/pip /.chexstack-copy-hidden-4-0\n"
            "HOROVOD_GPU_ALLREDUCE=NCCL pip install horovod==0.16.2\n"
            "chexstack_unmount /root/.cache/pip /.chexstack-copy-hidden-4-0") in post
    assert any(":4: RUN: --mount=type=cache" in w for w in mount.warnings)
    heredoc = convert(next(CASES.glob("28-*-heredoc.Dockerfile"))).text
    assert ("/bin/sh -c 'set -e\napt-get update\napt-get install -y --no-install-recommends openssh-server\n'"
            in heredoc)


def test_converted_definitions_are_valid_sh(tmp_path):
    """Every %post and %runscript of the corpus parses as POSIX sh (dash -n when present, else sh -n)."""
    for dockerfile in corpus():
        if dockerfile.name.startswith("refuse-"):
            continue
        text = convert(dockerfile).text
        for section in re.findall(r"^%(?:post|runscript|startscript)\n(.*?)(?=^%|^Bootstrap:|\Z)", text, re.S | re.M):
            script = tmp_path / "s.sh"
            script.write_text(section)
            p = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
            assert p.returncode == 0, (dockerfile.name, p.stderr, section)


def test_words_follow_docker():
    assert [literal(w) for w in words('a "b c" \'$d\' e\\ f', {})] == ["a", "b c", "$d", "e f"]
    assert literal(words("${X:-dflt}/${Y:+set}$Z", {"X": "", "Y": "1", "Z": "z"}, split=False)[0]) == "dflt/setz"
    assert literal(words("${BASE_ONLY:-dflt}", {}, split=False)[0]) is None  # the base image may define it
    assert shell(words("/opt/bin:$PATH", {}, split=False)[0]) == '"/opt/bin:${PATH}"'
    assert shell(words('"two words"', {}, split=False)[0]) == '"two words"'
    with pytest.raises(UnsupportedExpansion):
        words("${V%%.*}", {"V": "1.2"})


@pytest.mark.parametrize("command, simple", [
    ("apt-get install -y x", True), ("A=1 make install", True), ("ls -l > out.txt", True), ("a | b", True),
    ("a && b", False), ("a; b", False), ("cd /x", False), ("A=1", False), ("set -x", False), ("a\nb", False),
    ("echo 'unbalanced", False), ("a || b", False), ("(a)", False), ("a &", False),
])
def test_only_simple_commands_are_inlined(command, simple):
    assert _simple(command) is simple


def test_build_arg_needs_a_value():
    assert parse_build_args(["CUDA_VERSION=11.8.0", "EMPTY="]) == {"CUDA_VERSION": "11.8.0", "EMPTY": ""}
    with pytest.raises(ChexstackError, match="expected NAME=VALUE"):
        parse_build_args(["CUDA_VERSION"])


def test_build_arg_overrides_a_stage_default(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nARG V=1\nRUN echo $V\n")
    assert "export V=2\n" in convert(df, {"V": "2"}).text


def test_invoke_convert_exit_2_names_the_line(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nVOLUME /data\n")
    p = cmd.run("convert", str(df))
    assert p.returncode == 2
    assert "%s:2: VOLUME /data: Apptainer images have no volumes" % df in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
