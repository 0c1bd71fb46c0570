"""The equivalence proof on the real tool (``tests/harness/equivalence.py``): every corpus pair of
``tests/data/convert`` is built by Docker from the Dockerfile and by ``apptainer build --sandbox`` from its converted
definition (its ``Bootstrap: docker`` headers made ``docker-daemon``: no registry here, the ``From:`` image is the
local engine's); the two must have the same file tree (paths, types, modes, owners, link targets, contents of files
under 2 MiB), environment, labels and ``run``/``exec`` results.

A pair opts out with ``# chexstack-harness: no (why)`` (BuildKit-only syntax: this engine's API builds with the
classic builder; downloads). ``# chexstack-harness: run ARGS`` / ``exec ARGV`` lines add run cases (``run`` with no
arguments is always one). A control shows the harness sees a difference when the definition is wrong.

Cost of each test, measured here (2 cores, shared, load 3-5; the base image built): add-forms 10 s, copy-dockerignore 11
s, the control 12 s, arg-scope 13 s, metadata 14 s, run-forms 15 s, user 15 s, env-forms 18 s, the ``%files from`` test
24 s, entrypoint-shell 26 s, cmd-shell 28 s, case 52 against the micromamba stand-in 21 s (about 3 minutes; 5 min
14 s measured at load 4.5-6; 6 min 6 s for these 13 on 2026-12-06 with 7 other sessions on the 2 cores); ``SLOW_PAIRS``
(marked ``slow``, multi-stage or several images): from-stages 33 s, entrypoint-cmd 37 s, copy-forms 45 s,
copy-from-symlinks 52 s, copy-from-image 57 s (in a full ``make test`` on 2026-12-04: 43, 21, 22, 26 and 27 s);
the field's pairs (issue 45), each also converted with the base's config not read (``UNREAD_PAIRS``): 6 tests in
224 s on 2026-12-06 (field-env-stages unread 47 s alone, the three unread 1 to 2 minutes each at load 3-5). The
cpu stack's own definition, both stages built by Apptainer (its devel stage takes the cached Horovod wheel): 394 s in
that run (313 s in a cold-cache run; now tests/test_images_equivalence_stack.py). Every pair and the stack run in
``make test`` (CI): 33 min 9 s and, Docker's cache
emptied, 38 min 39 s in all. Not built by either
tool here: add-url (downloads from the network) and buildkit-forms (heredocs need the ``docker/dockerfile:1.4`` frontend
from a registry, and this docker CLI builds with BuildKit only through buildx); their conversions are checked by
``tests/test_convert.py`` only.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
from docker.utils.build import tar as build_tar

from convert import dockerignore
from convert.dockerfile import convert
from images.context import context_tar
from images.docker_build import docker_build
from tests.harness.equivalence import build, compare_images, exec_apptainer, explain
from tests.lib.convert_corpus import own_pairs, pair_name
from tests.lib.paths import CONVERT_CORPUS

#: ``beside``: neither the cpu image nor the test cluster (the cpu stack's own definition is in
#: tests/test_images_equivalence_stack.py, in the engine lane): ``make test`` runs these beside the engine lane.
pytestmark = [pytest.mark.docker, pytest.mark.beside]
if not (shutil.which("apptainer") or shutil.which("singularity")) and not os.environ.get("CI"):
    pytestmark.append(pytest.mark.skip(reason="no apptainer on PATH (scripts/setup --apptainer installs it)"))
_DIRECTIVE = re.compile(r"^# chexstack-harness: (no|run|exec)\b ?(.*)$", re.M)


#: The pairs that took more than about 30 s each (module docstring): marked ``slow``.
SLOW_PAIRS = {"from-stages", "entrypoint-cmd", "copy-forms", "copy-from-symlinks", "copy-from-image",
              "field-env-stages", "field-copy-from-link-pattern"}
#: The field's kinds (issue 45) converted with the base's config NOT read (``convert.base.OFFLINE``), as for a base the
#: engine does not hold: the runscript takes the ENTRYPOINT/CMD Apptainer's bootstrap recorded, ENV PATH=...:$PATH
#: stays ${PATH} for the shell.
UNREAD_PAIRS = ["cmd-without-entrypoint", "field-env-stages", "field-copy-from-link-pattern"]


def _pairs() -> list:
    out = []
    for p in own_pairs():
        if pair_name(p).startswith("refuse-") or any(m.group(1) == "no" for m in _DIRECTIVE.finditer(p.read_text())):
            continue
        out.append(pytest.param(p, id=pair_name(p), marks=pytest.mark.slow if pair_name(p) in SLOW_PAIRS else ()))
    return out


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


@pytest.mark.parametrize("dockerfile", _pairs())
def test_corpus_pair_builds_and_runs_the_same(client, debian_base, dockerfile, stage_images, tmp_path):
    _builds_the_same(client, debian_base, dockerfile, convert(dockerfile).text, tmp_path)


def _builds_the_same(client, debian_base, dockerfile, definition: str, tmp_path) -> None:
    """``dockerfile`` built by Docker and ``definition`` (its conversion) by Apptainer: no difference in files,
    environment, user, folder or its ``run``/``exec`` cases; both builds removed afterwards."""
    docker_image = _docker_image(client, dockerfile)
    sandbox = build(definition, dockerfile.parent, tmp_path, cache=True)
    try:
        runs, execs = _cases(dockerfile)
        diffs = compare_images(client, docker_image, sandbox, debian_base, runs=runs, execs=execs)
        assert not diffs, explain(diffs)
    finally:
        sandbox.remove()
        client.images.remove(docker_image, force=True)


@pytest.mark.parametrize("name", UNREAD_PAIRS)
def test_a_pair_builds_and_runs_the_same_with_the_base_unread(client, debian_base, name, stage_images, tmp_path):
    from convert.base import OFFLINE

    dockerfile = CONVERT_CORPUS / ("%s.Dockerfile" % name)
    _builds_the_same(client, debian_base, dockerfile, convert(dockerfile, bases=OFFLINE).text, tmp_path)


def test_the_harness_sees_a_wrong_definition(client, debian_base, stage_images, tmp_path):
    """Control: a definition that loses COPY --chown (owners differ) and one ENV (the run-time environment
    differs) is reported on both counts."""
    dockerfile = CONVERT_CORPUS / "copy-forms.Dockerfile"
    right = convert(dockerfile).text
    wrong = right.replace(" /opt/owned worker:worker\n", " /opt/owned\n").replace("%post\n", "%environment\n"
                                                                                    "export EXTRA=1\n%post\n", 1)
    assert wrong.count("EXTRA") == 1 and "worker:worker" not in wrong
    docker_image = _docker_image(client, dockerfile)
    sandbox = build(wrong, dockerfile.parent, tmp_path, cache=True)
    try:
        diffs = {d.what: d for d in compare_images(client, docker_image, sandbox, debian_base)}
        assert diffs["file /opt/owned/top.txt"].docker == "f 644 1234 1234 2"
        assert diffs["file /opt/owned/top.txt"].apptainer == "f 644 0 0 2"
        assert diffs["env EXTRA"].docker == "(absent)" and diffs["env EXTRA"].apptainer == "1"
    finally:
        sandbox.remove()
        client.images.remove(docker_image, force=True)


def test_files_from_a_stage_keeps_its_links_as_docker_does(client, debian_base, stage_images, tmp_path):
    """``%files from STAGE`` (Apptainer's ``CopyFromStage``): links inside a folder stay links, absolute ones
    dangling in the new stage too, a link named as the source is followed in the stage, a folder merges into one
    the image has; the same image as Docker's ``COPY --from``."""
    make = ("mkdir -p /opt/d/sub && echo x > /opt/d/sub/f && chmod 750 /opt/d/sub && ln -s /usr/bin/absent /opt/d/abs"
            " && ln -s sub/f /opt/d/rel && ln -s ../../bin/true /opt/d/sub/up && ln -s /opt/d /opt/link"
            " && ln -s sources.list.d /etc/apt/chexstack-link && chmod 700 /etc/apt/apt.conf.d")
    dockerfile = ("FROM %s AS one\nRUN %s\nFROM %s\nCOPY --from=one /opt/d /opt/d\nCOPY --from=one /opt/link /opt/e\n"
                  "COPY --from=one /etc/apt /etc/apt\n" % (debian_base, make, debian_base))
    definition = ("Bootstrap: docker\nFrom: %s\nStage: one\n%%post\n    umask 022\n    %s\n\n"
                  "Bootstrap: docker\nFrom: %s\n"
                  "Stage: two\n%%files from one\n    /opt/d /opt/d\n    /opt/link /opt/e\n    /etc/apt /etc\n"
                  % (debian_base, make, debian_base))
    stage_images.append(dockerfile)
    docker_image = docker_build(client, context_tar(dockerfile, {}), quiet=True)
    sandbox = build(definition, tmp_path, tmp_path, cache=True)
    try:
        diffs = compare_images(client, docker_image, sandbox, debian_base, labels=False)
        assert not diffs, explain(diffs)
        _, out = exec_apptainer(sandbox, ["sh", "-c", "readlink /opt/d/abs /opt/e/rel /etc/apt/chexstack-link;"
                                          " stat -c %a /opt/e/sub /etc/apt/apt.conf.d"])
        assert out.split() == ["/usr/bin/absent", "sub/f", "sources.list.d", "750", "700"]
    finally:
        sandbox.remove()
        client.images.remove(docker_image, force=True)


def test_a_base_images_shell_user_and_workdir_build_the_same(client, micromamba_standin, stage_images, tmp_path):
    """Case 52 (the micromamba-docker README pattern) against the stand-in of micromamba's base image
    (``tests.lib.standins``): its config read from the engine by ``invoke convert``, both builds run the RUNs as
    uid 57439 in /tmp through the base's SHELL, the second with the environment activated by the ARG, and
    ``run`` goes through the base's ENTRYPOINT in its WORKDIR: the same files (owners included), environment and
    run output. (The user ``apptainer run`` runs as is the invoking one's, not compared.)"""
    from tests.lib.standins import case52_context

    dockerfile = case52_context(tmp_path, micromamba_standin)
    stage_images.append(dockerfile.read_text())
    docker_image = docker_build(client, build_tar(str(dockerfile.parent)), quiet=True)
    sandbox = build(convert(dockerfile).text, dockerfile.parent, tmp_path / "build", cache=True)
    try:
        history = (sandbox.path / "opt/conda/conda-meta/history").read_text()
        assert history == "installed by 57439:57439 in /tmp HOME=/home/mambauser from /tmp/env.yaml\n"
        assert (sandbox.path / "tmp/my_uuid").read_text().startswith("python stand-in, uid 57439, in /tmp: -c")
        diffs = compare_images(client, docker_image, sandbox, micromamba_standin,
                               runs=[[], ["sh", "-c", "pwd; echo $PATH; command -v python"]])
        assert not diffs, explain(diffs)
    finally:
        sandbox.remove()
        client.images.remove(docker_image, force=True)
