"""``invoke convert`` reads the base image's config (``convert.base``): case 52 (the micromamba-docker README
pattern, whose RUNs depend on the base's SHELL, USER, WORKDIR and ENV), ONBUILD triggers, ``Bootstrap:
docker-daemon`` for a base only the local engine holds.

Unit lane: the reader is a stub (``_reader``) or ``OFFLINE`` (the engine's absence made explicit). Docker lane: a
stand-in of micromamba's base image is built in the local engine under ``chexstack-test/`` (never the upstream
name) with the config pattern of mamba-org/micromamba-docker's ``Dockerfile``
(https://github.com/mamba-org/micromamba-docker/blob/main/Dockerfile: ``ENV MAMBA_USER``, a user of uid 57439,
``USER $MAMBA_USER``, ``WORKDIR /tmp``, ``SHELL ["/usr/local/bin/_dockerfile_shell.sh"]``, ``ENTRYPOINT
["/usr/local/bin/_entrypoint.sh"]``, ``CMD ["/bin/bash"]``; the shell activates the environment when
``MAMBA_DOCKERFILE_ACTIVATE=1``, mamba-org/micromamba-docker#60), and the case's Dockerfile is converted with its
FROM pointed at it (a copy of the context with the FROM line rewritten: the file has no ARG for its base).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from chexstack.errors import ChexstackError
from convert.base import OFFLINE, BaseImage, from_config
from convert.definition import Definition
from convert.dockerfile import UNREAD_DIFFERS, convert
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden
from tests.lib.paths import CASES
from tests.lib.standins import case52_context

CASE52 = CASES / "52-micromamba-context"
BASE52 = "mambaorg/micromamba:0.21.0"
#: The config of micromamba's base image (the pattern of its Dockerfile, module docstring), as ``docker image
#: inspect`` gives ``Config``.
MICROMAMBA_CONFIG = {
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MAMBA_USER=mambauser",
            "MAMBA_ROOT_PREFIX=/opt/conda", "ENV_NAME=base"],
    "User": "mambauser", "WorkingDir": "/tmp", "Shell": ["/usr/local/bin/_dockerfile_shell.sh"],
    "Entrypoint": ["/usr/local/bin/_entrypoint.sh"], "Cmd": ["/bin/bash"]}


def _reader(configs: dict[str, dict], local_only: bool = False):
    """A reader that knows ``configs`` (image -> ``Config``), as the local engine would hold them."""
    def read(image: str) -> BaseImage:
        if image in configs:
            return from_config(image, configs[image], "a stub engine", local_only)
        return OFFLINE(image)
    return read


def _post(text: str) -> str:
    return "\n".join(Definition.parse(text).stages[-1].section("post")[0].body)


# --- case 52: without the base's config, the refusal names the real reason ----------------------------------------
def test_52_refused_for_the_base_config_it_depends_on_at_its_line():
    """Offline (the base not read): exit 2 at line 2, naming the base's config as the reason, where it was looked
    for, and what makes the file convertible -- not only the undefined ``$MAMBA_USER``."""
    p = cmd.run("convert", str(CASE52 / "Dockerfile"), "--pull", "never",
                env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert p.returncode == 2, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert "Traceback" not in out
    line = next(l for l in out.splitlines() if l.startswith("error:"))
    assert ("%s:2: COPY --chown=$MAMBA_USER:$MAMBA_USER env.yaml /tmp/env.yaml: --chown refers to $MAMBA_USER"
            % (CASE52 / "Dockerfile")) in line
    assert "the build depends on the base image %s's config" % BASE52 in line
    for word in ("SHELL", "USER", "WORKDIR", "ENTRYPOINT", "no Docker engine answers", "no registry",
                 "`docker pull %s`" % BASE52):
        assert word in line, word


def test_52_base_not_in_the_engine_is_named_so():
    with pytest.raises(ChexstackError, match=r":2: COPY .*could not be read: not looked up"):
        convert(CASE52 / "Dockerfile", bases=OFFLINE)


def test_52_with_the_base_config_reproduces_shell_user_workdir_env_and_entrypoint():
    """The base's config read (a stub of micromamba's): RUNs through its SHELL as mambauser in /tmp, the second
    with MAMBA_DOCKERFILE_ACTIVATE=1, --chown resolved, the runscript through ENTRYPOINT + CMD; the words after
    ``#`` on the ARG line are no variables (warned)."""
    result = convert(CASE52 / "Dockerfile", bases=_reader({BASE52: MICROMAMBA_CONFIG}))
    text = result.text
    assert "Bootstrap: docker\nFrom: %s\n" % BASE52 in text
    post = _post(text)
    assert "chexstack_copy /.chexstack-copy-2-1/env.yaml /tmp/env.yaml mambauser:mambauser" in post
    assert "cd /tmp" in post
    assert ("chexstack_as mambauser /usr/local/bin/_dockerfile_shell.sh 'micromamba install --yes --file "
            "/tmp/env.yaml &&     micromamba clean --all --yes'") in post
    activate = post.index("export MAMBA_DOCKERFILE_ACTIVATE=1")
    assert activate < post.index("chexstack_as mambauser /usr/local/bin/_dockerfile_shell.sh 'python -c")
    assert not re.search(r"export [^A-Za-z_]|export (python|will|not|be|found)\b", post)
    runscript = "\n".join(Definition.parse(text).stages[-1].section("runscript")[0].body)
    assert "cd /tmp" in runscript and "set -- /bin/bash" in runscript
    assert 'exec /usr/local/bin/_entrypoint.sh "$@"' in runscript
    assert any(":5: ARG: # (otherwise python will not be found)" in w and "no comment" in w
               for w in result.warnings), result.warnings
    assert any("USER mambauser" in w for w in result.warnings)
    assert_golden("convert/base-52-micromamba.def", text)


# --- the base's config in general ------------------------------------------------------------------------------
def test_a_base_only_the_engine_holds_is_bootstrapped_from_the_daemon(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM chexstack-test/base:1\nRUN true\nCOPY --from=chexstack-test/other:2 /etc/hostname /x\n")
    text = convert(df, bases=_reader({"chexstack-test/base:1": {}, "chexstack-test/other:2": {}},
                                     local_only=True)).text
    assert "Bootstrap: docker-daemon\nFrom: chexstack-test/base:1\n" in text
    assert "Bootstrap: docker-daemon\nFrom: chexstack-test/other:2\n" in text
    pulled = convert(df, bases=_reader({"chexstack-test/base:1": {}})).text
    assert "Bootstrap: docker\nFrom: chexstack-test/base:1\n" in pulled


def test_a_base_not_read_converts_as_before_with_a_warning(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nRUN true\n")
    result = convert(df, bases=OFFLINE)
    assert result.warnings == [
        "%s:1: FROM: the base image debian:12's config (ENV, USER, WORKDIR, SHELL, ENTRYPOINT, CMD, ONBUILD) was not "
        "read: not looked up (the conversion was asked to read no engine); the definition assumes Docker's defaults "
        "(root, /, /bin/sh -c), which the base may not keep (`docker pull debian:12`, then convert again)%s"
        % (df, UNREAD_DIFFERS)]
    assert "%runscript" not in result.text


def test_cmd_without_entrypoint_takes_the_bases_entrypoint_read_or_bootstrapped(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM chexstack-test/base:1\nCMD [\"serve\"]\n")
    text = convert(df, bases=_reader({"chexstack-test/base:1": {"Entrypoint": ["/init"], "Cmd": ["sh"]}})).text
    assert 'if [ "$#" -eq 0 ]; then set -- serve; fi\nexec /init "$@"' in text
    # not read: the runscript takes the ENTRYPOINT Apptainer's bootstrap recorded (OCI_ENTRYPOINT), with the CMD
    unread = convert(df, bases=OFFLINE)
    assert ("/.singularity.d/chexstack-base-run.sh  # the base image's, as Apptainer's bootstrap recorded them\n"
            'if [ "$#" -eq 0 ]; then set -- serve; fi\n') in unread.text
    assert 'eval "exec $OCI_ENTRYPOINT \\"\\$@\\""' in unread.text
    assert any("CMD without ENTRYPOINT: the runscript runs it with the base image's ENTRYPOINT" in w
               for w in unread.warnings)


def test_the_base_env_resolves_user_workdir_and_env_as_docker_expands_them(tmp_path):
    """jupyter's ``USER ${NB_UID}`` kind: the base's ENV is known to the expansions; an ENV that extends the
    base's PATH is expanded with its value, as Docker does."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM chexstack-test/nb:1\nUSER root\nWORKDIR $HOME/work\nUSER ${NB_UID}\n"
                  "ENV PATH=/opt/x/bin:$PATH\nRUN id\n")
    config = {"Env": ["PATH=/usr/bin:/bin", "NB_UID=1000", "HOME=/home/jovyan"], "User": "1000"}
    text = convert(df, bases=_reader({"chexstack-test/nb:1": config})).text
    post = _post(text)
    assert "# the base image's USER 1000: the RUN commands after it run as 1000" in post
    assert "mkdir -p /home/jovyan/work\ncd /home/jovyan/work" in post
    assert "export PATH=/opt/x/bin:/usr/bin:/bin" in post
    assert post.endswith("chexstack_as 1000 /bin/sh -c id")


def test_an_undefined_name_with_the_config_read_says_docker_reads_it_empty(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM chexstack-test/base:1\nUSER $NOBODY\n")
    with pytest.raises(ChexstackError, match=r":2: USER \$NOBODY: \$NOBODY expands to nothing: neither this "
                                             r"Dockerfile nor the base image .*'s ENV \(read from a stub engine\) "
                                             r"defines what it names, so Docker reads it empty"):
        convert(df, bases=_reader({"chexstack-test/base:1": {}}))


def test_with_the_config_read_a_name_nothing_defines_is_unset_as_docker_reads_it(tmp_path):
    """Neither the base's ENV nor the Dockerfile sets APP or X: ``${APP:-/app}`` and ``${APP-/app}`` are the word,
    ``$X`` empty (Docker expands with the image's ENV and the build's ARGs only: ``$HOME`` there is not the run-time
    user's); a declared ARG whose value is not known and ``TARGETARCH`` (Docker's own) stay references."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM chexstack-test/base:1\nWORKDIR ${APP:-/app}/${APP-x}\nENV LOG=$HOME/log P=$TARGETARCH\n")
    post = _post(convert(df, bases=_reader({"chexstack-test/base:1": {"Env": ["PATH=/bin"]}})).text)
    assert "mkdir -p /app/x\ncd /app/x" in post
    assert 'export LOG=/log\nexport P="${TARGETARCH}"' in post


# --- where a base's config is read: the engine, then its registry (--pull) -----------------------------------------
def test_the_first_reader_that_reads_the_base_wins_and_a_base_none_reads_gives_each_reason():
    from convert.base import first_read

    def says(why):
        return lambda image: BaseImage(image, why_not=why)

    read = first_read(says("not in the engine"), _reader({"b:1": {"User": "7"}}), says("never asked"))
    assert read("b:1").user == "7" and read("b:1").read_from == "a stub engine"
    unread = read("c:1")
    assert not unread.read and unread.why_not == "not in the engine; not looked up (the conversion was asked to " \
                                                 "read no engine); never asked"


def test_pull_never_reads_no_registry_and_another_policy_is_refused_naming_the_option():
    from convert.base import pull_reader

    assert pull_reader("missing") is None  # convert's default: the engine, then the registry
    with pytest.raises(ChexstackError, match=r"^--pull 'sometimes': expected one of missing, never$"):
        pull_reader("sometimes")
    p = cmd.run("convert", str(CASE52 / "Dockerfile"), "--pull", "sometimes", expect=2)
    assert p.stderr.strip() == "error: --pull 'sometimes': expected one of missing, never"


def test_a_registry_that_cannot_be_reached_leaves_the_base_unread_naming_it_and_the_cause():
    """A registry reader on an address where nothing listens (port 9 on the loopback): not read, the registry and
    skopeo's cause named; where skopeo is not installed the reason says that instead (the condition explicit)."""
    import shutil

    from convert.base import registry_reader

    base = registry_reader(timeout=20)("127.0.0.1:9/chexstack-test/base:1")
    assert not base.read and base.pinned is None
    if shutil.which("skopeo"):
        assert base.why_not.startswith("registry 127.0.0.1:9: cannot read 127.0.0.1:9/chexstack-test/base:1: it "
                                       "cannot be reached ("), base.why_not
    else:
        assert "needs skopeo, which is not on PATH" in base.why_not
    bad = registry_reader()("Not/A Reference")
    assert not bad.read and bad.why_not.startswith("the base image 'Not/A Reference': not an image reference")


# --- ONBUILD ---------------------------------------------------------------------------------------------------
def test_onbuild_in_the_dockerfile_is_dropped_with_a_warning(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nONBUILD RUN echo child\nRUN true\n")
    result = convert(df, bases=_reader({"debian:12": {}}))
    assert "child" not in result.text
    assert any(":2: ONBUILD: dropped: ONBUILD triggers act only on images built FROM this one" in w
               for w in result.warnings)


def test_a_bases_onbuild_triggers_run_right_after_from(tmp_path):
    df = tmp_path / "Dockerfile"
    (tmp_path / "app.py").write_text("print(1)\n")
    df.write_text("FROM chexstack-test/onbuild:1\nRUN echo mine\n")
    config = {"OnBuild": ["COPY app.py /app/", "RUN echo trigger"]}
    post = _post(convert(df, bases=_reader({"chexstack-test/onbuild:1": config})).text)
    assert post.index("chexstack_copy /.chexstack-copy-1-1/app.py /app/") < post.index("echo trigger") \
        < post.index("echo mine")
    config = {"OnBuild": ["VOLUME /data"]}
    with pytest.raises(ChexstackError, match=r":1: FROM chexstack-test/onbuild:1: the base image's trigger ONBUILD "
                                             r"VOLUME /data: Apptainer images have no volumes"):
        convert(df, bases=_reader({"chexstack-test/onbuild:1": config}))


# --- docker lane: the stand-in of micromamba's base image (tests/lib/standins.py) -------------------------------
@pytest.mark.docker
@pytest.mark.beside
def test_52_against_a_base_in_the_engine_reads_its_config(micromamba_standin, tmp_path):
    """Case 52 with FROM pointed at the stand-in: through ``invoke convert``, the config read from the engine gives
    the same definition as the stub of micromamba's config (the golden), bootstrapped from the daemon (the
    stand-in was never pulled)."""
    df = case52_context(tmp_path, micromamba_standin)
    p = cmd.run("convert", str(df))
    assert p.returncode == 0, p.stdout + p.stderr
    golden = (Path(__file__).parent / "golden" / "convert" / "base-52-micromamba.def").read_text()
    assert p.stdout == golden.replace("Bootstrap: docker\nFrom: %s\n" % BASE52,
                                      "Bootstrap: docker-daemon\nFrom: %s\n" % micromamba_standin)
    assert "was not read" not in p.stderr and "ARG: # (otherwise python will not be found)" in p.stderr


@pytest.mark.docker
@pytest.mark.beside
def test_a_bases_onbuild_triggers_are_read_from_the_engine_and_run_after_from(client, debian_base, tmp_path):
    """A base built here with ONBUILD triggers (the engine's ``Config.OnBuild``): the child's definition runs them
    right after its FROM, from the child's build context, bootstrapped from the daemon."""
    from images.context import context_tar
    from images.docker_build import docker_build
    from tests.lib.leftovers import TEST_LABELS

    tag = "chexstack-test/onbuild-standin:1"
    base = "FROM %s\nONBUILD COPY app.txt /app/\nONBUILD RUN cat /app/app.txt > /app/seen\n" % debian_base
    image_id = docker_build(client, context_tar(base, {}), labels=TEST_LABELS, quiet=True)
    client.images.get(image_id).tag(tag)
    try:
        (tmp_path / "app.txt").write_text("x\n")
        df = tmp_path / "Dockerfile"
        df.write_text("FROM %s\nRUN echo mine\n" % tag)
        p = cmd.run("convert", str(df))
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Bootstrap: docker-daemon\nFrom: %s\n" % tag in p.stdout
        assert "%files\napp.txt /.chexstack-copy-1-1/app.txt\n" in p.stdout
        post = _post(p.stdout)
        assert post.index("chexstack_copy /.chexstack-copy-1-1/app.txt /app/") \
            < post.index("cat /app/app.txt > /app/seen") < post.index("echo mine")
    finally:
        client.images.remove(tag, force=True)


@pytest.mark.parametrize("line, exported, warned", [
    ("ARG A=1  # (otherwise python will not be found)", ["A=1"],
     "# (otherwise python will not be found): the words after the first are no comment to Docker"),
    ("ARG A=1 # note=x", ["A=1", "note=x"], "# note=x: the words after the first are no comment to Docker"),
    ("ARG A=1 B-C", ["A=1"], "B-C: not variable names"),
])
def test_the_words_after_an_arg_are_more_args_to_docker(tmp_path, line, exported, warned):
    """Case 52's ``ARG MAMBA_DOCKERFILE_ACTIVATE=1  # (otherwise ...``: BuildKit reads every word as one more
    declaration. Those without a value set nothing (warned, none exported: ``%post`` stays valid sh); one with a
    value under a shell name is set, by Docker and by ``%post`` alike (``note=x``)."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\n%s\nRUN echo ok\n" % line)
    result = convert(df, bases=OFFLINE)
    exports = [l.split(" ", 1)[1] for l in _post(result.text).splitlines() if l.startswith("export ")]
    assert exports == exported
    assert any(":2: ARG: %s" % warned in w for w in result.warnings), result.warnings


def test_an_arg_with_a_value_under_no_shell_name_is_refused(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nARG A=1 (x=1\n")
    with pytest.raises(ChexstackError, match=r":2: ARG A=1 \(x=1: ARG \(x: not a variable name %post can export"):
        convert(df, bases=OFFLINE)
