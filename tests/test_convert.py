"""Dockerfile -> Singularity definition (``invoke convert``): ../shared/cases 09-12, 27, 28 and the corpus.

The corpus: every ``tests/data/convert/*.Dockerfile`` (build context: ``tests/data/convert``, whose ``files/`` they
copy), every ``tests/data/convert/<name>/Dockerfile`` (a pair with a build context of its own, e.g. one with a
``.dockerignore``; named by its folder) and the case 27/28 Dockerfiles converts to exactly
``tests/golden/convert/<name>.def`` or is refused with exactly ``<name>.refused`` (the message after the file
name: line, instruction, why); a name starting with ``refuse-`` is a refusal. Regenerate with
``CHEXSTACK_UPDATE_GOLDEN=1`` and review. The same pairs are built and run both ways by
``tests/test_images_equivalence.py``.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from chexstack.errors import ChexstackError
from convert import dockerfile as dockerfile_module
from convert.base import OFFLINE
from convert.definition import Definition, Section, Stage
from convert.dockerfile import UNREAD_DIFFERS, _simple, convert, parse_build_args, save
from convert.words import UnsupportedExpansion, literal, shell, words
from tests.lib import cli as cmd
from tests.lib.convert_corpus import own_pairs, pair_name
from tests.lib.golden import GOLDEN_DIR, assert_golden
from tests.lib.paths import CASES, CONVERT_CORPUS
from tests.lib.readonly import run_with_read_only

SHARED_PAIRS = ["27-spython-add-url-and-local-tarball", "28-dockerfile-buildkit-syntax-heredoc",
                "28-dockerfile-buildkit-syntax-run-mount"]


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    """Every conversion here reads no base image's config (``convert.base.OFFLINE``): the goldens depend on the
    Dockerfile's text alone, never on what the local engine happens to hold. ``tests/test_convert_base.py`` tests
    the config read."""
    monkeypatch.setattr(dockerfile_module, "default_reader", lambda *args, **kwargs: OFFLINE)


def unread(path, image: str, line: int = 1) -> str:
    """The warning of a base image whose config was not read (``OFFLINE``)."""
    return ("%s:%d: FROM: the base image %s's config (ENV, USER, WORKDIR, SHELL, ENTRYPOINT, CMD, ONBUILD) was not "
            "read: not looked up (the conversion was asked to read no engine); the definition assumes Docker's "
            "defaults (root, /, /bin/sh -c), which the base may not keep (`docker pull %s`, then convert again)%s"
            % (path, line, image, image, UNREAD_DIFFERS))


def corpus() -> list[Path]:
    """Every corpus Dockerfile: ours, then the shared cases that are part of it."""
    return own_pairs() + [CASES / ("%s.Dockerfile" % n) for n in SHARED_PAIRS]


def _case(n: str) -> str:
    return str(next(CASES.glob("%s-*.Dockerfile" % n)))


def _expected_blocks(n: str) -> list[str]:
    """The fenced blocks under '## Correct ...' in the case's expected.md."""
    text = next(CASES.glob("%s-*.expected.md" % n)).read_text()
    correct = re.split(r"^## Correct.*$", text, flags=re.M)[1].split("\n## ")[0]
    return re.findall(r"```\n(.*?)```", correct, re.S)


@pytest.mark.parametrize("dockerfile", corpus(), ids=pair_name)
def test_corpus_pair(dockerfile: Path):
    name = pair_name(dockerfile)
    if name.startswith("refuse-"):
        with pytest.raises(ChexstackError) as e:
            convert(dockerfile)
        message = str(e.value)
        assert message.startswith(str(dockerfile))
        assert_golden("convert/%s.refused" % name, message[len(str(dockerfile)):] + "\n")
    else:
        assert_golden("convert/%s.def" % name, convert(dockerfile).text)


def _post(text: str) -> str:
    """The first stage's first ``%post`` body."""
    return "\n".join(Definition.parse(text).stages[0].section("post")[0].body)


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


@pytest.mark.parametrize("image, build_args, expected", [
    ("nvidia/cuda:${CUDA}-devel-ubuntu${UBUNTU:-22.04}", {}, "nvidia/cuda:11.8.0-devel-ubuntu22.04"),
    ("nvidia/cuda:${CUDA}-devel-ubuntu${UBUNTU:-22.04}", {"UBUNTU": "20.04"}, "nvidia/cuda:11.8.0-devel-ubuntu20.04"),
    ("nvidia/cuda:${CUDA}-devel-ubuntu${UBUNTU:-22.04}", {"UBUNTU": ""}, "nvidia/cuda:11.8.0-devel-ubuntu22.04"),
    ("nvidia/cuda:${CUDA}${UBUNTU:+-ubuntu}-devel", {}, "nvidia/cuda:11.8.0-devel"),
    ("nvidia/cuda:${CUDA}-devel-ubuntu${NEVER_DECLARED:-22.04}", {}, "nvidia/cuda:11.8.0-devel-ubuntu22.04"),
    ("$IMAGE", {}, "nvidia/cuda:11.8.0-devel-ubuntu22.04"),  # a global ARG's default sees the ARGs before it
    ("nvidia/cuda:${CUDA}-devel-ubuntu${UBUNTU-22.04}", {},
     r"ARG UBUNTU has no value.*\$\{UBUNTU-\.\.\.\} tells an empty ARG from one without a value"),
    ("nvidia/cuda:${CUDA}${UBUNTU+-ubuntu}", {}, r"ARG UBUNTU has no value"),
    ("nvidia/cuda:${CUDA}-devel-ubuntu$UBUNTU", {}, r"ARG UBUNTU has no value"),
    ("nvidia/cuda:${CUDA}-devel-ubuntu${NEVER_DECLARED}", {"NEVER_DECLARED": "22.04"},
     r"FROM refers to \$NEVER_DECLARED, which no ARG before the first FROM declares"),
    ("nvidia/cuda:${CUDA}-${TARGETARCH:-amd64}", {}, r"FROM refers to \$TARGETARCH, which Docker sets itself"),
])
def test_09_a_global_arg_without_value_resolves_the_forms_docker_reads_alike(tmp_path, image, build_args, expected):
    """Case 09's kind: ``ARG UBUNTU`` without a value is unset for the classic builder and BuildKit's buildMetaArgs,
    empty for older BuildKit: ``${UBUNTU:-22.04}`` is 22.04 and ``${UBUNTU:+x}`` empty for both, resolved;
    ``$UBUNTU``, ``${UBUNTU-x}``, ``${UBUNTU+x}`` refused. A build argument no global ARG declares is not seen, and
    the automatic platform ARGs are never read as blank."""
    df = tmp_path / "Dockerfile"
    df.write_text("ARG CUDA=11.8.0\nARG UBUNTU\nARG IMAGE=nvidia/cuda:${CUDA}-devel-ubuntu${UBUNTU:-22.04}\n"
                  "FROM %s\nRUN echo ok\n" % image)
    if expected.startswith("nvidia/"):
        assert "\nFrom: %s\n" % expected in convert(df, build_args).text
    else:
        with pytest.raises(ChexstackError, match=r":4: FROM .*" + expected):
            convert(df, build_args)


@pytest.mark.parametrize("instruction", [
    "LABEL v=%s", "WORKDIR /opt/%s", "USER %s", "COPY a.txt /opt/%s/", "ADD a.txt /opt/%s/", "EXPOSE 80%s",
    "STOPSIGNAL SIG%s", "COPY --chown=%s a.txt /opt/",
])
@pytest.mark.parametrize("form, reads", [
    ("${V:-TERM}", "TERM only where the image sets no V, or an empty one"),
    ("${V-TERM}", "TERM only where the image sets no V"),
    ("${V:+TERM}", "TERM only where the image sets V, not empty"),
    ("${V+TERM}", "TERM only where the image sets V"),
    ("$V", "the image's V, empty where it sets none"),
])
def test_a_stage_arg_without_value_is_the_base_images_variable(tmp_path, instruction, form, reads):
    """New user's report: `ARG VERSION` (no value, no --build-arg) then `LABEL version=${VERSION:-dev}` was refused
    as "this Dockerfile does not define". It is declared, but Docker sets no variable for it (BuildKit's dispatchArg
    adds one only for an ARG with a value; the classic builder's FilterAllowed alike), so every form, the colon ones
    too, reads the base image's environment, as for a name no ARG declares: refused in the instructions that need a
    literal value, naming the ARG's line and what gives it one; a --build-arg resolves it."""
    (tmp_path / "a.txt").write_text("a\n")
    df = tmp_path / "Dockerfile"
    line = instruction % form
    df.write_text("FROM debian:12\nARG V\n%s\n" % line)
    with pytest.raises(ChexstackError) as e:
        convert(df)
    assert str(e.value).startswith("%s:3: %s: " % (df, line))
    assert str(e.value).endswith(
        "refers to $V, which ARG V (line 2) declares without a value and no --build-arg sets: Docker then sets no "
        "variable, so %s reads the base image's environment (it is %s), which a definition cannot see; give it a "
        "value: ARG V=VALUE, or --build-arg V=VALUE (V= for the empty value)" % (form, reads))
    convert(df, {"V": "TERM"})


def test_a_stage_arg_given_the_empty_value_resolves_the_colon_forms(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nARG VERSION\nLABEL version=${VERSION:-dev} tagged=x${VERSION:+-tagged}\n")
    assert "%labels\nversion dev\ntagged x\n" in convert(df, {"VERSION": ""}).text
    assert "%labels\nversion 1.2\ntagged x-tagged\n" in convert(df, {"VERSION": "1.2"}).text


def test_a_stage_arg_without_value_stays_a_reference_where_the_shell_reads_it(tmp_path):
    """ENV and an ARG's default are written for the shell: a valueless ARG's name stays ``${V...}``, read in the
    base image's environment when %post and %environment run, as in Docker (was: ENV refused). An ARG without a
    value keeps the value the stage has (BuildKit adds no variable: ``ARG A=1`` then ``ARG A`` is 1; was: lost),
    and an ENV of the name gives it one."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nARG V\nENV X=${V:-dev} Y=$V\nARG W=${V:+set}\nARG A=1\nARG A\nENV B=2\n"
                  "ARG B\nLABEL a=$A b=$B\nRUN echo $V\n")
    text = convert(df).text
    assert ('export X="${V:-dev}"\nexport Y="${V}"\nexport W="${V:+set}"\nexport A=1\nexport B=2\necho $V\n'
            in _post(text) + "\n")
    assert "%environment\nexport X=\"${V:-dev}\"\nexport Y=\"${V}\"\nexport B=2\n" in text
    assert "%labels\na 1\nb 2\n" in text
    assert "export V" not in text


def test_10_env_exported_during_post_and_at_run_time():
    text = convert(_case("10")).text
    environment, post_start = _expected_blocks("10")
    environment = environment.replace("%environment must contain one export per pair, quotes preserved:\n", "")
    assert "%environment\n" + environment in text
    post = _post(text).splitlines()
    assert post[0] == post_start.splitlines()[1] == ". /.singularity.d/env/10-docker*.sh"
    assert post[1] == "umask 022"  # Docker's RUN umask (Apptainer's %post has 0002)
    assert post[2].startswith('PATH="${PATH:-/usr/local/sbin:')  # Docker's PATH where the base sets none
    assert post[3].startswith('case ":${LD_LIBRARY_PATH:-}:" in *:/.singularity.d/libs:*)')  # Apptainer's own
    assert post[4].startswith("for d in /tmp /var/tmp; do") and post[6] == "done"  # the image's own /tmp
    assert post[7:13] == environment.strip().splitlines()
    # the RUN is one `sh -c` command: under `sh -e`, `apt-get update && ...` inline would not stop a failed build
    assert post[13].startswith("/bin/sh -c 'apt-get update && apt-get install")
    assert post[13].endswith("pip3 install --no-cache-dir horovod==0.28.1'")


def test_10_every_pair_of_one_env_reads_the_values_from_before_it(tmp_path):
    """Case 10's kind (Dockerfile reference, "Environment replacement": ``ENV abc=hello``, ``ENV abc=bye def=$abc``
    gives def=hello): ``ENV A=2 B=$A`` after ``ENV A=1`` gives B=1; a pair reading a base image variable that an
    earlier pair of the same ENV sets is exported before it. ARG is not alike: BuildKit expands each ARG pair with
    the pairs before it (``dispatch`` skips ``ArgCommand``'s expansion, ``dispatchArg`` expands pair by pair), and a
    LABEL sets no variable."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:22.04\nENV A=1\nENV A=2 B=$A\nRUN echo \"$B\" > /b.txt\n"
                  "ENV PATH=/opt/bin:$PATH OLD_PATH=$PATH\nARG X=1 Y=$X\nLABEL a=$A b=$B\n")
    text = convert(df).text
    assert "export A=1\nexport A=2\nexport B=1\necho \"$B\" > /b.txt\n" in _post(text) + "\n"
    assert 'export OLD_PATH="${PATH}"\nexport PATH="/opt/bin:${PATH}"\nexport X=1\nexport Y=1' in _post(text)
    assert "%labels\na 2\nb 1\n" in text


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


@pytest.mark.parametrize("dest, expected", [
    (".", "/opt/chexnet/"), ("./", "/opt/chexnet/"), ("sub/", "/opt/chexnet/sub/"), ("/abs/", "/abs/"),
    ("..", None), ("sub", None), ("/abs", None), ("sub/.", None),
])
def test_11_several_sources_go_to_a_folder_as_buildkit_reads_one(tmp_path, dest, expected):
    """Case 11's kind: BuildKit's dispatchCopy makes ``.`` and a destination ending in / a folder, so ``COPY a b .``
    copies both into the WORKDIR; anything else with several sources is refused (the classic builder refuses all
    but a trailing /, the Dockerfile reference asks for one)."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:20.04\nWORKDIR /opt/chexnet\nCOPY train.py labels.csv %s\n" % dest)
    if expected is None:
        with pytest.raises(ChexstackError, match=r":3: COPY .*: with more than one source the destination must be a "
                                                 r"folder: end it in / \(or write \., the WORKDIR\)"):
            convert(df)
        return
    post = _post(convert(df).text)
    assert ("chexstack_copy /.chexstack-copy-3-1/train.py %s\nchexstack_copy /.chexstack-copy-3-2/labels.csv %s"
            % (expected, expected)) in post


def test_12_user_never_su_dash():
    result = convert(_case("12"))
    text = result.text
    assert "chexstack_as trainer /bin/sh -c 'echo \"running as $(whoami)\" && touch /workspace/owned-by-trainer'" \
        in text
    assert "setpriv --reuid=\"$u\" --regid=\"$g\" $groups" in text
    assert "useradd -m ${NB_USER} && mkdir -p /workspace && chown -R ${NB_USER} /workspace" in text  # untouched
    assert not re.search(r"^\s*su\s+-", text, re.M)
    assert any("USER trainer" in w and "invoking host user" in w for w in result.warnings)


def test_12_workdir_after_user_makes_the_users_folders(tmp_path):
    """Case 12's kind: after ``USER 1001:2000`` a WORKDIR the image lacks is made by ``chexstack_workdir``, so the
    RUN after it can write there (BuildKit's dispatchWorkdir makes it with the user); as root, plain ``mkdir -p``."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:20.04\nRUN groupadd -g 2000 lab && useradd -m -u 1001 -g lab trainer\n"
                  "USER 1001:2000\nWORKDIR /home/trainer/work\nRUN touch owned && id > id.txt\nUSER root\n"
                  "WORKDIR /opt/root-made\nRUN apt-get update\n")
    post = _post(convert(df).text)
    assert ("chexstack_workdir 1001:2000 /home/trainer/work\ncd /home/trainer/work\n"
            "chexstack_as 1001:2000 /bin/sh -c 'touch owned && id > id.txt'\n") in post
    assert "mkdir -p /opt/root-made\ncd /opt/root-made\napt-get update" in post


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("getent"), reason="chown needs root; names need getent")
def test_chexstack_workdir_owns_only_the_folders_it_makes(tmp_path):
    """The helper as BuildKit's llb.Mkdir(WithParents, WithUser): each folder it creates gets the user (a uid
    alone: the same gid; a name: its passwd uid and gid; a group name: its gid), one that exists keeps its owner,
    an unknown name stops the build."""
    from convert.dockerfile import HELPERS

    def workdir(user: str, path: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-ec", HELPERS["workdir"] + "\nchexstack_workdir \"$1\" \"$2\"", "sh", user,
                               str(path)], capture_output=True, text=True)

    def owner(path: Path) -> tuple[int, int]:
        st = path.stat()
        return st.st_uid, st.st_gid

    nobody = subprocess.run(["getent", "passwd", "nobody"], capture_output=True, text=True).stdout.split(":")
    root_group = subprocess.run(["getent", "group", "0"], capture_output=True, text=True).stdout.split(":")[0]
    assert workdir("4321", tmp_path / "a" / "b c").returncode == 0
    assert owner(tmp_path) == (0, 0) and owner(tmp_path / "a") == owner(tmp_path / "a" / "b c") == (4321, 4321)
    assert (tmp_path / "a" / "b c").stat().st_mode & 0o777 == 0o755
    assert workdir("4321:77", tmp_path / "a" / "d").returncode == 0
    assert owner(tmp_path / "a") == (4321, 4321) and owner(tmp_path / "a" / "d") == (4321, 77)
    assert workdir("nobody", tmp_path / "n").returncode == 0
    assert owner(tmp_path / "n") == (int(nobody[2]), int(nobody[3]))
    assert workdir("nobody:%s" % root_group, tmp_path / "m").returncode == 0
    assert owner(tmp_path / "m") == (int(nobody[2]), 0)
    assert workdir("4321", tmp_path).returncode == 0 and owner(tmp_path) == (0, 0)
    unknown = workdir("no-such-user-x", tmp_path / "u")
    assert unknown.returncode == 1 and "no user no-such-user-x in /etc/passwd" in unknown.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_copy_chown_without_a_group_takes_the_users_id_as_the_group(tmp_path):
    """COPY --chown without a group, as BuildKit (Docker's default builder) reads it (solver/llbsolver/file's
    readUser): a numeric ID is also the group, a name takes its passwd uid and primary group; with a group, both as
    given (``chexstack_copy``, also under ADD and COPY --from)."""
    from convert.dockerfile import HELPERS

    def copy(owner: str, name: str) -> tuple[int, int]:
        staged = tmp_path / ("stage-" + name) / name
        staged.parent.mkdir()
        staged.write_text("x")
        ran = subprocess.run(["sh", "-ec", HELPERS["copy"] + '\nchexstack_copy "$1" "$2" "$3" ""', "sh", str(staged),
                              str(tmp_path / "dest" / name), owner], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        st = (tmp_path / "dest" / name).stat()
        return st.st_uid, st.st_gid

    nobody = tuple(int(subprocess.run(["id", flag, "nobody"], capture_output=True, text=True).stdout)
                   for flag in ("-u", "-g"))
    assert copy("4321", "a") == (4321, 4321)
    assert copy("4321:77", "b") == (4321, 77)
    assert copy("nobody", "c") == nobody
    assert copy("", "d") == (0, 0)


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
        if pair_name(dockerfile).startswith("refuse-"):
            continue
        for section in [s for stage in Definition.parse(convert(dockerfile).text).stages for s in stage.sections
                        if s.name in ("post", "runscript", "startscript")]:
            script = tmp_path / "s.sh"
            script.write_text("\n".join(section.body) + "\n")
            p = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
            assert p.returncode == 0, (dockerfile.name, p.stderr, section)


def test_words_follow_docker():
    assert [literal(w) for w in words('a "b c" \'$d\' e\\ f', {})] == ["a", "b c", "$d", "e f"]
    assert literal(words("${X:-dflt}/${Y:+set}$Z", {"X": "", "Y": "1", "Z": "z"}, split=False)[0]) == "dflt/setz"
    assert literal(words("${BASE_ONLY:-dflt}", {}, split=False)[0]) is None  # the base image may define it
    blank = {"NO_VALUE"}  # empty or unset, not known which: only the colon forms read both alike
    assert literal(words("${NO_VALUE:-dflt}${NO_VALUE:+set}", {}, split=False, blank=blank)[0]) == "dflt"
    assert [literal(words(t, {}, split=False, blank=blank)[0]) for t in ("$NO_VALUE", "${NO_VALUE-d}", "${NO_VALUE+s}")
            ] == [None, None, None]
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


def test_build_arg_without_a_value_takes_the_environments():
    """As the docker CLI reads --build-arg (its ValidateEnv): NAME alone is NAME's value in the environment, the
    empty one included; None where the environment does not set it (the CLI sends the name without a value, which
    the daemon drops: the ARG keeps its default)."""
    environ = {"CUDA_VERSION": "12.2.0", "EMPTY_HERE": ""}
    assert parse_build_args(["A=1", "EMPTY=", "CUDA_VERSION", "EMPTY_HERE", "UNSET", "B=x=y", "A=2"], environ) == {
        "A": "2", "EMPTY": "", "CUDA_VERSION": "12.2.0", "EMPTY_HERE": "", "UNSET": None, "B": "x=y"}
    for bad in ("=1", "1A=1", "A B=1", ""):
        with pytest.raises(ChexstackError, match=r"expected NAME=VALUE or NAME \(its value from the environment\)"):
            parse_build_args([bad], environ)


def test_invoke_convert_build_arg_from_the_environment(tmp_path):
    """New user's report: `--build-arg NAME` was refused. Its value comes from the environment; where the environment
    does not set it, the ARG keeps its default and a warning says why."""
    df = tmp_path / "Dockerfile"
    df.write_text("ARG BASE=debian:11\nFROM ${BASE}\nARG V=1\nRUN echo $V\n")
    p = cmd.run("convert", str(df), "--build-arg", "V", "--build-arg", "BASE", env={"V": "7", "BASE": "debian:12"})
    assert p.returncode == 0, p.stderr
    assert "From: debian:12\n" in p.stdout and "export V=7\n" in p.stdout
    assert p.stderr.strip().split("\n")[:-1] == ["warning: %s" % unread(df, "debian:12", 2)]
    p = cmd.run("convert", str(df), "--build-arg", "V", env={"V": None})
    assert p.returncode == 0, p.stderr
    assert "export V=1\n" in p.stdout
    assert p.stderr.strip().split("\n")[1:-1] == ["warning: %s: --build-arg V: V is not set in this environment, "
                                                  "so Docker passes no value (the ARG keeps its default)" % df]


def test_a_build_arg_no_arg_declares_is_not_consumed(tmp_path):
    """New user's report: `--build-arg FOO=1` for an ARG the Dockerfile never declares was accepted silently. The
    classic builder's warning (moby's WarnOnUnusedBuildArgs: names sorted; a global ARG, a stage ARG that an ENV of
    the same name outranks and the predefined proxy ARGs consume theirs), the definition unchanged."""
    df = tmp_path / "Dockerfile"
    df.write_text("ARG GLOBAL=1\nFROM debian:12\nENV SHADOWED=1\nARG SHADOWED\nARG V=1\nRUN echo $V\n")
    plain = convert(df, {"V": "2"})
    assert plain.warnings == [unread(df, "debian:12", 2)]
    result = convert(df, {"V": "2", "FOO": "1", "BAR": None, "GLOBAL": "3", "SHADOWED": "4", "HTTP_PROXY": "x"})
    assert result.text == plain.text
    assert result.warnings == [
        unread(df, "debian:12", 2),
        "%s: --build-arg BAR: BAR is not set in this environment, so Docker passes no value (the ARG keeps its "
        "default)" % df,
        "%s: [Warning] One or more build-args [BAR FOO] were not consumed (no ARG declares them; the definition does "
        "not use them either)" % df]


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


# --- --output: never over what the conversion reads, written whole or not at all ---------------------------------

def _context(tmp_path: Path) -> Path:
    """A build context: a Dockerfile that COPYs notes.md, and notes.md."""
    (tmp_path / "notes.md").write_text("notes\n")
    df = tmp_path / "Dockerfile"
    df.write_text('FROM debian:12\nCOPY notes.md /docs/\nWORKDIR /\nENTRYPOINT ["true"]\n')
    return df


@pytest.mark.parametrize("output, what", [
    ("Dockerfile", "the Dockerfile being converted"),
    ("link.def", "the Dockerfile being converted"),  # a symbolic link to it
    ("hard.def", "the Dockerfile being converted"),  # a hard link to it
    (".dockerignore", "where Docker reads the build context's ignore file"),  # not there yet: Docker would read it
    ("Dockerfile.dockerignore", "where Docker reads this Dockerfile's own ignore file"),
    ("notes.md", "the source notes.md of COPY at line 2"),
])
def test_invoke_convert_never_writes_over_what_it_reads(tmp_path, output, what):
    """New user's report: `--output D/Dockerfile` replaced the Dockerfile with the definition (exit 0), also through
    a link to it. Now exit 2 naming the file, and nothing is written."""
    df = _context(tmp_path)
    (tmp_path / "link.def").symlink_to("Dockerfile")
    os.link(df, tmp_path / "hard.def")
    before = {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()}
    p = cmd.run("convert", str(df), "--output", str(tmp_path / output))
    named = {"link.def": df, "hard.def": df}.get(output, tmp_path / output)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == ("error: --output %s: that is %s (%s); writing the definition there would change the "
                                "build it converts: choose another path" % (tmp_path / output, what, named))
    assert {p.name: p.read_text() for p in tmp_path.iterdir() if p.is_file()} == before
    assert (tmp_path / "link.def").is_symlink()


def test_invoke_convert_output_is_written_whole_beside_the_context(tmp_path):
    """A new file gets open()'s mode (0666 less the umask), an existing one keeps its mode, a link keeps pointing at
    the file it names (which gets the definition); no temporary file is left; a conversion that fails leaves the
    earlier output as it was."""
    df = _context(tmp_path)
    out = tmp_path / "Singularity.def"
    p = cmd.run("convert", str(df), "--output", str(out))
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert out.read_text() == convert(df).text
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    out.chmod(0o640)
    (tmp_path / "link.def").symlink_to("Singularity.def")
    out.write_text("old\n")
    assert cmd.run("convert", str(df), "--output", str(tmp_path / "link.def")).returncode == 0
    assert (tmp_path / "link.def").is_symlink() and out.read_text() == convert(df).text
    assert out.stat().st_mode & 0o777 == 0o640
    df.write_text(df.read_text() + "VOLUME /data\n")
    p = cmd.run("convert", str(df), "--output", str(out))
    assert p.returncode == 2 and "VOLUME /data" in p.stderr
    assert out.read_text() == convert(_context(tmp_path)).text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile", "Singularity.def", "link.def", "notes.md"]
    save(convert(_context(tmp_path)), "/dev/null")  # not a regular file: written in place, never replaced
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_failed_write_leaves_the_old_output_and_no_temporary_file(tmp_path, monkeypatch):
    df = _context(tmp_path)
    out = tmp_path / "Singularity.def"
    out.write_text("old\n")

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("convert.dockerfile.os.replace", full)
    with pytest.raises(ChexstackError, match=r"^--output %s: cannot write it \(No space left on device\); nothing "
                       r"was written$" % re.escape(str(out))):
        save(convert(df), out)
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile", "Singularity.def", "notes.md"]


def test_invoke_convert_output_folder_missing_or_read_only_is_named(tmp_path):
    df = _context(tmp_path)
    p = cmd.run("convert", str(df), "--output", str(tmp_path / "no" / "x.def"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == "error: --output %s: folder %s does not exist; create it or choose another path" % (
        tmp_path / "no" / "x.def", tmp_path / "no")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    p = run_with_read_only(read_only, [*cmd.CHEXSTACK, "convert", str(df), "--output", str(read_only / "x.def")])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == "error: --output %s: cannot write in %s (Read-only file system)" % (
        read_only / "x.def", read_only)
    assert list(read_only.iterdir()) == []


# --- .dockerignore (case 42 and the kind: any COPY/ADD source the context's ignore file excludes in part) ---------

CASE42 = CASES / "42-ssd-context" / "Dockerfile"


def _files_lines(text: str) -> list[tuple[str, str]]:
    """The build-context ``%files`` lines of a one-stage definition as (source, destination)."""
    section = text.split("%files\n", 1)[1].split("\n%", 1)[0]
    return [tuple(line.split()) for line in section.splitlines()]


def _copied_files(context: Path, sources: list[str]) -> set[str]:
    """The context's files (relative paths) the ``%files`` sources bring, folders expanded."""
    out = set()
    for src in sources:
        here = context / src
        out |= {p.relative_to(context).as_posix() for p in here.rglob("*") if not p.is_dir()} if here.is_dir() \
            else {src}
    return out


def test_42_ssd_copies_into_the_workdir_without_what_dockerignore_excludes():
    """Case 42 through `invoke convert`: FROM from the ARG, WORKDIR made and entered, the legacy `ENV key "value"`
    exported in %post and %environment, each COPY in /workspace before the RUN that needs it, and `COPY . .` without
    runs/ and *.pt (the context's .dockerignore), saying so."""
    p = cmd.run("convert", str(CASE42))
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "\nFrom: nvcr.io/nvidia/pytorch:20.06-py3\n" in text
    post = _post(text)
    assert "mkdir -p /workspace\ncd /workspace\n" in post
    export = 'export PYTHONPATH="${PYTHONPATH}:/workspace"'
    assert export in post.splitlines() and text.split("%environment\n", 1)[1].splitlines()[0] == export
    order = [line for line in post.splitlines() if line.startswith(("chexstack_copy /", "pip install"))]
    assert order == ["chexstack_copy /.chexstack-copy-12-1/requirements.txt /workspace/",
                     "pip install -r requirements.txt",
                     "chexstack_copy /.chexstack-copy-16-1/setup.py /workspace/",
                     "chexstack_copy /.chexstack-copy-17-1/csrc /workspace/csrc",
                     "pip install .",
                     "chexstack_copy /.chexstack-copy-20-1/context /workspace/"]
    whole = [src for src, dst in _files_lines(text) if dst.startswith("/.chexstack-copy-20-1/")]
    assert "runs" not in whole and not any(s.startswith("runs/") or s.endswith(".pt") for s in whole)
    assert _copied_files(CASE42.parent, whole) == {".dockerignore", "Dockerfile", "requirements.txt", "setup.py"} | {
        p.relative_to(CASE42.parent).as_posix() for p in (CASE42.parent / "csrc").rglob("*")}
    assert "epoch_64.pt" not in text
    assert ":20: COPY: source .: the context's .dockerignore leaves out runs, as Docker does" in p.stderr


def test_42_golden():
    assert_golden("images/convert-42.def", convert(CASE42).text)


@pytest.mark.parametrize("dockerfile", [CASE42, CONVERT_CORPUS / "copy-dockerignore" / "Dockerfile"],
                         ids=["case42", "copy-dockerignore"])
def test_copy_of_the_whole_context_brings_what_docker_sends(dockerfile: Path):
    """`COPY . .` brings exactly the files of the context tar the docker SDK makes as `docker build` sends it
    (``docker.utils.build.tar`` with the ignore file), less the .dockerignore when it excludes itself (the daemon
    removes it then, and COPY does not copy it)."""
    import tarfile

    from docker.utils.build import tar

    from convert import dockerignore

    context = dockerfile.parent
    ignore = dockerignore.ignore_file(context, dockerfile)
    patterns = dockerignore.read_patterns(ignore)
    with tarfile.open(fileobj=tar(str(context), exclude=list(patterns))) as t:
        sent = {m.name for m in t if not m.isdir()}
    try:
        dockerignore.Context(context, dockerfile).select(dockerignore.IGNORE_FILE)
    except dockerignore.Excluded:
        sent.discard(dockerignore.IGNORE_FILE)
    text = convert(dockerfile).text
    line = next(n for n, l in enumerate(dockerfile.read_text().splitlines(), 1) if l.strip() == "COPY . .")
    staged = "/.chexstack-copy-%d-1/context/" % line
    assert _copied_files(context, [s for s, d in _files_lines(text) if d.startswith(staged)]) == sent


def test_dockerignore_exceptions_inside_an_excluded_folder_and_the_dockerfiles_own_ignore_file(tmp_path):
    """`!` re-includes a file below an excluded folder (the folder is made, its other members left out), and a
    `<Dockerfile>.dockerignore` beside the Dockerfile wins over the context's .dockerignore (BuildKit)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "keep.txt").write_text("k")
    (tmp_path / "runs" / "epoch_1.pt").write_text("w")
    (tmp_path / "runs").chmod(0o750)  # made, not copied: its mode is set as Docker copies it
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / ".dockerignore").write_text("\ufeff# comment\n  runs  \n! runs/keep.txt\n\n")
    df = tmp_path / "app.Dockerfile"
    df.write_text("FROM debian:12\nCOPY . /app/\nADD runs /opt/runs\n")
    result = convert(df)
    assert [s for s, _ in _files_lines(result.text)] == [".dockerignore", "a.txt", "app.Dockerfile", "runs/keep.txt",
                                                         "runs/keep.txt"]
    assert "mkdir -p /.chexstack-copy-2-1/context/runs\nchmod 750 /.chexstack-copy-2-1/context/runs\n" in result.text
    assert "mkdir -p /.chexstack-copy-3-1/runs\nchmod 750 /.chexstack-copy-3-1/runs\nchexstack_add " not in result.text
    assert "mkdir -p /.chexstack-copy-3-1/runs\nchexstack_add /.chexstack-copy-3-1/runs /opt/runs\n" in result.text
    assert any(":3: ADD: source runs: the context's .dockerignore leaves out runs/epoch_1.pt" in w
               for w in result.warnings)
    (tmp_path / "app.Dockerfile.dockerignore").write_text("a.txt\n")
    assert [s for s, _ in _files_lines(convert(df).text)] == [".dockerignore", "app.Dockerfile",
                                                              "app.Dockerfile.dockerignore", "runs", "runs"]
    (tmp_path / "app.Dockerfile.dockerignore").write_text("runs/*\n")  # runs/ is sent, empty: made, not refused
    emptied = convert(df).text
    assert "runs" not in [s for s, _ in _files_lines(emptied)]
    assert "mkdir -p /.chexstack-copy-3-1/runs\nchexstack_add /.chexstack-copy-3-1/runs /opt/runs\n" in emptied
    (tmp_path / "app.Dockerfile.dockerignore").write_text("runs\n")
    with pytest.raises(ChexstackError, match=r":3: ADD runs /opt/runs: .*the context's app.Dockerfile.dockerignore"):
        convert(df)


def test_an_ignore_file_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / ".dockerignore").write_bytes(b"\xff\xfe runs\n")
    (tmp_path / "x").write_text("x")
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nCOPY . /app/\n")
    with pytest.raises(ChexstackError,
                       match=r"^%s: cannot read the ignore file" % re.escape(str(tmp_path / ".dockerignore"))):
        convert(df)


# --- the definition model (convert/definition.py) ----------------------------------------------------------------
RENDERED = sorted(GOLDEN_DIR.glob("convert/*.def")) + sorted(GOLDEN_DIR.glob("images/*.def"))


@pytest.mark.parametrize("golden", RENDERED, ids=lambda p: "%s/%s" % (p.parent.name, p.name))
def test_a_definition_parses_back_to_its_own_text(golden):
    """Converted Dockerfiles and hpccm's stack definitions (``BootStrap``, ``# NOTE`` lines above each stage, blank
    lines in the bodies) are read by the one model and written back byte for byte."""
    text = golden.read_text()
    definition = Definition.parse(text)
    assert definition.text() == text
    assert [s.image for s in definition.stages] == [line.split(": ", 1)[1] for line in text.splitlines()
                                                    if line.startswith("From: ")]


def test_the_model_reads_stages_sections_and_their_bodies():
    text = ("# one\n\nBootstrap: docker\nFrom: a:1\nStage: build\n%files from x\n    /o /p\n%post\n    make\n\n"
            "# NOTE\nBootStrap: docker-daemon\nFrom: b:2\n%post\n    one\n\n%post\n    two\n")
    d = Definition.parse(text)
    assert d.preamble == ("# one",) and d.text() == text
    first, second = d.stages
    assert (first.bootstrap, first.image, first.name, first.comments) == ("docker", "a:1", "build", ())
    assert first.sections == (Section("files", "from x", ("    /o /p",)), Section("post", "", ("    make",)))
    assert (second.keyword, second.bootstrap, second.name, second.comments) == ("BootStrap", "docker-daemon", None,
                                                                                ("# NOTE",))
    assert [s.body for s in second.section("post")] == [("    one", ""), ("    two",)]
    assert Definition((Stage("docker", "a:1", sections=(Section("post", body=("true",)),)),)).text() == (
        "Bootstrap: docker\nFrom: a:1\n%post\ntrue\n")


@pytest.mark.parametrize("text, why", [
    ("%post\n    true\n", "no `Bootstrap:` header"),
    ("Bootstrap: docker\nFrom: a\nIncludeCmd: yes\n%post\n", "line 3: 'IncludeCmd: yes': expected From: or Stage:"),
    ("Bootstrap: docker\nStage: a\n%post\n", "line 1: 'Bootstrap: docker': the stage has no From:"),
    ("Bootstrap: docker\nFrom: a\n%post\n    true\nBootstrap: docker\nFrom: b\n",
     "line 5: 'Bootstrap: docker': a blank line must separate"),
])
def test_a_definition_the_model_cannot_read_is_refused_naming_the_line(text, why):
    with pytest.raises(ChexstackError, match=re.escape(why)):
        Definition.parse(text)


def test_the_harness_builds_from_the_local_engine_changing_only_the_bootstrap_lines():
    """``tests/harness/equivalence.py`` reads definitions through the model: every ``Bootstrap: docker`` stage
    becomes ``docker-daemon``, every other line stays."""
    from tests.harness.equivalence import from_local_engine

    for golden in [GOLDEN_DIR / "images" / "cpu.def", GOLDEN_DIR / "convert" / "from-stages.def"]:
        text = golden.read_text()
        local = from_local_engine(text)
        changed = [(a, b) for a, b in zip(text.splitlines(), local.splitlines()) if a != b]
        assert len(local.splitlines()) == len(text.splitlines()) and changed
        assert all(b == a.replace(": docker", ": docker-daemon") and re.match(r"Boot[sS]trap: docker$", a)
                   for a, b in changed), changed
    with pytest.raises(ChexstackError, match="no `Bootstrap: docker` header"):
        from_local_engine("Bootstrap: docker-archive\nFrom: x.tar\n")
    daemon = "Bootstrap: docker-daemon\nFrom: chexstack-test/base:1\n%post\ntrue\n"
    assert from_local_engine(daemon) == daemon


def test_the_harness_reuses_a_stage_only_for_the_same_build_inputs(tmp_path):
    """``build(..., cache=True)`` keys a stage by what its build reads: the same stage text, tool version,
    ``From:`` image ID, named context files and copied-from stages give the same key; a change of any one of them
    (a byte or the mode of a named file, a link's target, a file added under a named folder) another; a context file
    the stage does not name changes nothing (the trainer's sources are the runtime stage's); a ``%files`` source
    that is not there, or a copy from a stage without a key, leaves the stage uncached (None)."""
    from tests.harness.equivalence import stage_key

    context = tmp_path / "context"
    (context / "build-only" / "gate").mkdir(parents=True)
    (context / "build-only" / "gate" / "a.py").write_text("a\n")
    (context / "build-only" / "ca.crt").symlink_to("gate/a.py")
    (context / "trainer.py").write_text("t\n")
    devel, runtime = Definition.parse(
        "Bootstrap: docker-daemon\nFrom: base:1\nStage: devel\n%files\n    build-only/gate /g\n"
        "    'build-only/ca.crt' /c\n%post\n    true\n\n"
        "Bootstrap: docker-daemon\nFrom: base:1\nStage: runtime\n%files from devel\n    /opt /opt\n").stages
    ids = {"base:1": "sha256:11"}

    def key(stage=devel, version="apptainer version 1.4.5", image_id=ids.get, keys=None):
        return stage_key(stage, context, version, image_id, keys or {})

    first = key()
    assert first == key() and len(first) == 64
    (context / "trainer.py").write_text("changed\n")
    assert key() == first
    others = [key(replace(devel, sections=devel.sections[:-1])), key(version="apptainer version 1.4.6"),
              key(image_id={"base:1": "sha256:12"}.get)]
    (context / "build-only" / "gate" / "a.py").write_text("b\n")
    others.append(key())
    (context / "build-only" / "gate" / "a.py").chmod(0o755)
    others.append(key())
    (context / "build-only" / "ca.crt").unlink()
    (context / "build-only" / "ca.crt").symlink_to("gate")
    others.append(key())
    (context / "build-only" / "gate" / "new").write_text("")
    others.append(key())
    assert len({first, *others}) == 1 + len(others)
    assert key(runtime, keys={"devel": first}) != key(runtime, keys={"devel": others[0]})
    assert key(runtime) is None
    (context / "build-only" / "gate" / "a.py").unlink()
    (context / "build-only" / "gate" / "new").unlink()
    shutil.rmtree(context / "build-only" / "gate")
    assert key() is None


def test_the_harness_cache_keeps_the_most_recently_used_stages_within_its_budget(tmp_path):
    """The least recently used stage sandboxes go first once the kept ones pass the byte budget (each size measured
    once, kept beside the sandbox, then read); the newest stays even when it alone is larger; what is not a kept
    stage (a partial build) is not the pruner's."""
    from tests.harness.equivalence import _prune_cache

    for age, (name, size) in enumerate([("stage-new", 300), ("stage-mid", 300), ("stage-old", 300),
                                        ("partial-x", 999)]):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "f").write_bytes(b"x" * size)
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    _prune_cache(tmp_path, 650)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partial-x", "stage-mid", "stage-mid.bytes", "stage-new",
                                                          "stage-new.bytes"]
    assert (tmp_path / "stage-new.bytes").read_text() == "300\n"  # measured once, then read
    (tmp_path / "stage-new.bytes").write_text("5\n")
    _prune_cache(tmp_path, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partial-x", "stage-new", "stage-new.bytes"]


def test_the_harness_compares_build_stamped_contents_without_their_stamp(tmp_path):
    """A pyc's source mtime (header bytes 8-12, PEP 552), /etc/shadow's last-change day and a wheel RECORD's
    hashes (of files compiled twice) differ between a cached Docker layer and a fresh Apptainer build of the same
    recipe: the harness leaves out that field only,
    and its sh filter (run in a Docker container) hashes as its Python one (run on a sandbox)."""
    import hashlib
    import importlib.util

    from tests.harness.equivalence import STAMPED, STAMPED_HASHES, stamp_filter
    code = importlib.util.MAGIC_NUMBER + b"\0\0\0\0"
    older, newer, other = code + b"\x01\0\0\0\x10\0\0\0body", code + b"\x02\0\0\0\x10\0\0\0body", \
        code + b"\x02\0\0\0\x10\0\0\0BODY"
    keep = stamp_filter("/opt/venv/lib/python3.11/site-packages/a/__pycache__/b.cpython-311.pyc")
    assert keep(older) == keep(newer) != keep(other)
    day = stamp_filter("/etc/shadow")
    assert day(b"root:*:19700:0:99999:7:::\nsshd:!:20425::::::\n") == day(b"root:*:20000:0:99999:7:::\n"
                                                                         b"sshd:!:19000::::::\n")
    assert day(b"root:*:19700:0:99999:7:::\n") != day(b"root:!:19700:0:99999:7:::\n")  # the password field counts
    assert stamp_filter("/etc/passwd") is None and stamp_filter("/opt/a.py") is None
    record = stamp_filter("/opt/venv/lib/python3.11/site-packages/horovod-0.28.1.dist-info/RECORD")
    lines = b"horovod/__init__.py,sha256=%s,1181\n\"a,b.py\",sha256=%s,7\nhorovod-0.28.1.dist-info/RECORD,,\n"
    one, two = lines % (b"Ab_-1" * 8, b"x" * 43), lines % (b"Zz9-_" * 8, b"y" * 43)
    assert record(one) == record(two) != record(one.replace(b",1181", b",1182"))  # sizes stay compared
    assert record(one).splitlines()[1] == b'"a,b.py",,7'
    # the sh filters, as the container runs them, against the Python ones
    shadow = b"root:*:19700:0:99999:7:::\nsshd:!:20425::::::\n"
    for (_, _, sh, py), data in zip(STAMPED, [older, shadow, one]):
        (tmp_path / "f").write_bytes(data)
        out = subprocess.run(["/bin/sh", "-c", sh + " | md5sum"], capture_output=True, check=True,
                             env={"p": str(tmp_path / "f"), "PATH": "/usr/bin:/bin"}).stdout.decode()
        assert out.split()[0] == hashlib.md5(py(data)).hexdigest()
    (tmp_path / "b.pyc").write_bytes(newer)
    listed = tmp_path / "list"
    listed.write_text("%s\n" % (tmp_path / "b.pyc"))
    out = subprocess.run(["/bin/sh", "-c", STAMPED_HASHES.replace("/.chexstack-harness-stamped", str(listed))],
                         capture_output=True, text=True, check=True).stdout
    assert out == "%s  %s\n" % (hashlib.md5(keep(newer)).hexdigest(), tmp_path / "b.pyc")
