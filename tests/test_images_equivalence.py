"""The equivalence harness (``images/equivalence.py``) with the real Docker engine: every corpus pair of
``tests/data/convert`` is built by Docker from the Dockerfile and, from its converted definition, the way Apptainer
builds it; the two images must have the same file tree (paths, types, modes, owners, link targets, contents of files
under 2 MiB), the same run-time environment, and the same ``run``/``exec`` results.

A pair opts out with ``# chexstack-harness: no (why)`` (BuildKit-only syntax: this engine's API builds with the
classic builder; downloads). ``# chexstack-harness: run ARGS`` / ``exec ARGV`` lines add run cases (``run`` with no
arguments is always one). A control shows the harness sees a difference when the definition is wrong.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from docker.utils.build import tar as build_tar

from images import dockerignore
from images.context import context_tar
from images.convert import convert
from images.docker_build import docker_build
from images.equivalence import Emulator, compare_images, exec_emulated, parse_definition
from tests.lib.paths import CONVERT_CORPUS
from tests.test_images_convert import own_pairs, pair_name

pytestmark = [pytest.mark.docker]
_DIRECTIVE = re.compile(r"^# chexstack-harness: (no|run|exec)\b ?(.*)$", re.M)


def _pairs() -> list[Path]:
    return [p for p in own_pairs() if not pair_name(p).startswith("refuse-")
            and ("no", ) not in [(m.group(1),) for m in _DIRECTIVE.finditer(p.read_text())]]


def _docker_image(client, dockerfile: Path) -> str:
    """The Docker build of a pair: the shared context's ``files/``, or a pair's own context folder as the docker
    CLI and SDK send it (its ``.dockerignore`` applied: the SDK's ``docker.utils.build.tar``)."""
    if dockerfile.name == "Dockerfile":
        ignore = dockerignore.ignore_file(dockerfile.parent, dockerfile)
        tar = build_tar(str(dockerfile.parent), exclude=dockerignore.read_patterns(ignore) if ignore else None)
    else:
        tar = context_tar(dockerfile.read_text(), {"files": dockerfile.parent / "files"})
    return docker_build(client, tar, quiet=True)


@pytest.fixture
def stage_images(client):
    """Removes the untagged stage images a multi-stage Docker build of the test leaves (the classic builder keeps
    each earlier stage as a dangling image): new dangling images whose last step is a RUN of a corpus Dockerfile,
    never another build's (the engine is shared). A test adds the text of its own Dockerfile to the yielded list."""
    before = {i.id for i in client.images.list(filters={"dangling": True})}
    own: list[str] = []
    yield own
    texts = " ".join([p.read_text() for p in own_pairs()] + own)
    for image in client.images.list(filters={"dangling": True}):
        last = (image.history() or [{}])[0].get("CreatedBy") or ""
        if image.id not in before and last.startswith("/bin/sh -c ") and last[len("/bin/sh -c "):][:60] in texts:
            try:
                client.images.remove(image.id)
            except Exception:  # in use: not ours to force
                pass


def _cases(dockerfile: Path) -> tuple[list[list[str]], list[list[str]]]:
    runs, execs = [[]], []
    for m in _DIRECTIVE.finditer(dockerfile.read_text()):
        if m.group(1) == "run":
            runs.append(shlex.split(m.group(2)))
        elif m.group(1) == "exec":
            execs.append(shlex.split(m.group(2)))
    return runs, execs


@pytest.mark.parametrize("dockerfile", _pairs(), ids=pair_name)
def test_corpus_pair_builds_and_runs_the_same(client, debian_base, dockerfile, stage_images):
    docker_image = _docker_image(client, dockerfile)
    built = Emulator(client, dockerfile.parent).build(convert(dockerfile).text)
    try:
        runs, execs = _cases(dockerfile)
        diffs = compare_images(client, docker_image, built.image, debian_base, runs=runs, execs=execs)
        assert not diffs, "\n".join("%s: docker %r, apptainer %r" % (d.what, d.docker, d.apptainer) for d in diffs)
    finally:
        built.remove()
        client.images.remove(docker_image, force=True)


@pytest.mark.docker
def test_the_harness_sees_a_wrong_definition(client, debian_base, stage_images):
    """Control: a definition that loses COPY --chown (owners differ) and one ENV (the run-time environment
    differs) is reported on both counts."""
    dockerfile = CONVERT_CORPUS / "copy-forms.Dockerfile"
    right = convert(dockerfile).text
    wrong = right.replace(" /opt/owned worker:worker\n", " /opt/owned\n").replace("%post\n", "%environment\n"
                                                                                    "export EXTRA=1\n%post\n", 1)
    assert wrong.count("EXTRA") == 1 and "worker:worker" not in wrong
    docker_image = _docker_image(client, dockerfile)
    built = Emulator(client, dockerfile.parent).build(wrong)
    try:
        diffs = {d.what: d for d in compare_images(client, docker_image, built.image, debian_base)}
        assert diffs["file /opt/owned/top.txt"].docker == "f 644 1234 1234 2"
        assert diffs["file /opt/owned/top.txt"].apptainer == "f 644 0 0 2"
        assert diffs["env EXTRA"].docker == "(absent)" and diffs["env EXTRA"].apptainer == "1"
    finally:
        built.remove()
        client.images.remove(docker_image, force=True)


@pytest.mark.docker
def test_files_from_a_stage_keeps_its_links_as_apptainer_does(client, debian_base, stage_images):
    """``%files from STAGE`` copies as Apptainer's ``CopyFromStage`` (Singularity >= 3.5.3): links inside a folder
    stay links, absolute ones dangling in the new stage too (copied before ``%post``), a link named as the source is
    followed in the stage, a folder merges into one the image has; the same image as Docker's ``COPY --from``."""
    make = ("mkdir -p /opt/d/sub && echo x > /opt/d/sub/f && chmod 750 /opt/d/sub && ln -s /usr/bin/absent /opt/d/abs"
            " && ln -s sub/f /opt/d/rel && ln -s ../../bin/true /opt/d/sub/up && ln -s /opt/d /opt/link"
            " && ln -s sources.list.d /etc/apt/chexstack-link && chmod 700 /etc/apt/apt.conf.d")
    dockerfile = ("FROM %s AS one\nRUN %s\nFROM %s\nCOPY --from=one /opt/d /opt/d\nCOPY --from=one /opt/link /opt/e\n"
                  "COPY --from=one /etc/apt /etc/apt\n" % (debian_base, make, debian_base))
    definition = ("Bootstrap: docker\nFrom: %s\nStage: one\n%%post\n    %s\n\nBootstrap: docker\nFrom: %s\n"
                  "Stage: two\n%%files from one\n    /opt/d /opt/d\n    /opt/link /opt/e\n    /etc/apt /etc\n"
                  % (debian_base, make, debian_base))
    stage_images.append(dockerfile)
    docker_image = docker_build(client, context_tar(dockerfile, {}), quiet=True)
    built = Emulator(client, Path(".")).build(definition)
    try:
        diffs = compare_images(client, docker_image, built.image, debian_base, labels=False)
        assert not diffs, "\n".join("%s: docker %r, apptainer %r" % (d.what, d.docker, d.apptainer) for d in diffs)
        _, out = exec_emulated(client, built.image, ["sh", "-c", "readlink /opt/d/abs /opt/e/rel /etc/apt/chexstack-link;"
                                                     " stat -c %a /opt/e/sub /etc/apt/apt.conf.d"])
        assert out.split() == ["/usr/bin/absent", "sub/f", "sources.list.d", "750", "700"]
    finally:
        built.remove()
        client.images.remove(docker_image, force=True)


def test_parse_definition_concatenates_sections_per_stage():
    stages = parse_definition("Bootstrap: docker\nFrom: a\nStage: one\n%post\n    x\n%files\n f /f\n%post\ny\n"
                              "Bootstrap: docker\nFrom: b\nStage: two\n%files from one\n/f /g\n")
    assert [s.name for s in stages] == ["one", "two"]
    assert stages[0].body("post") == ["    x", "y"] and stages[1].sections[0].args == "from one"


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CHEXSTACK_HARNESS_STACK") != "1",
                    reason="opt-in (CHEXSTACK_HARNESS_STACK=1): minutes beyond the cpu image build (README, harness)")
def test_cpu_stack_definition_builds_the_same_image(client, debian_base, cpu_build, tmp_path):
    """Item 2 of issue 13: ``invoke render --stack cpu --format singularity`` built as Apptainer would gives the
    verified Docker image: same files (the venv's symbolic links kept by ``%files from devel``), environment,
    Table 1 rows (every one a match) and run behaviour.

    The devel stage is reused from the Docker build (``--target devel``, from the engine's cache) unless
    ``CHEXSTACK_HARNESS_FULL=1``: emulating it compiles Horovod again (many minutes); the runtime stage, which is
    the image, is always built from the definition."""
    from envs.manifest import load_stack
    from images.equivalence import check_stack
    from images.render import build_context, render

    stack = load_stack("cpu")
    devel = docker_build(client, context_tar(render(stack, "docker", debian_base), build_context(stack, debian_base)),
                         quiet=True, target="devel")
    reuse = None if os.environ.get("CHEXSTACK_HARNESS_FULL") == "1" else {"devel": devel}
    report = check_stack(client, "cpu", debian_base, cpu_build.image_id, tmp_path / "context", reuse=reuse,
                         runs=[["python", "-m", "trainer", "--help"]],
                         execs=[["/bin/sh", "-c", "command -v python mpirun sshd; python -c 'import sys; "
                                 "print(sys.prefix)'; readlink /opt/venv/bin/python3"]],
                         docker_verification=cpu_build.verification)
    assert report.apptainer_ok, [r for r in report.apptainer_rows if r.verdict == "MISMATCH"]
    assert len(report.apptainer_rows) == len(report.docker_rows) >= 8
    assert not report.differences, "\n".join("%s: docker %r, apptainer %r" % (d.what, d.docker, d.apptainer)
                                             for d in report.differences[:40])
