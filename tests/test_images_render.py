"""Rendered recipes: golden text for every stack and format, and the properties converters get wrong
(../shared/cases/09-12) checked on our own renders."""
from __future__ import annotations

import re

import pytest

from chexstack.errors import ChexstackError
from envs.manifest import known_stacks, load_stack
from images import parts
from images.render import build_context, render
from tests.lib.golden import assert_golden

STACKS = known_stacks()


@pytest.mark.parametrize("fmt", ["docker", "singularity"])
@pytest.mark.parametrize("name", STACKS)
def test_golden_render(name, fmt):
    ext = "Dockerfile" if fmt == "docker" else "def"
    assert_golden("images/%s.%s" % (name, ext), render(load_stack(name), fmt))


@pytest.mark.parametrize("name", STACKS)
def test_base_lines_resolved_and_code_last(name):
    stack = load_stack(name)
    docker = render(stack, "docker")
    froms = re.findall(r"^FROM (\S+)", docker, re.M)
    assert froms and all("$" not in f for f in froms)
    assert all(f == stack.base.reference for f in froms)
    # the trainer is the very last layer, the probe just before it: a trainer-only change rebuilds seconds
    instructions = [l for l in docker.splitlines() if re.match(r"^[A-Z]+ ", l)]
    assert instructions[-1] == "COPY chexstack/trainer /opt/chexstack/trainer"
    assert instructions[-2] == "COPY chexstack/probe.py /opt/chexstack/facts/probe.py"
    sing = render(stack, "singularity")
    assert all("$" not in l for l in sing.splitlines() if l.startswith("From:"))
    assert not re.search(r"^\s*su\s+-", sing, re.M)


@pytest.mark.parametrize("name", STACKS)
def test_ca_only_in_stages_that_are_not_the_image(name):
    """The proxy CA is COPYed only by stages the final image copies nothing but named paths from."""
    docker = render(load_stack(name), "docker")
    final = docker.split("\nFROM ")[-1]
    assert parts.CONTEXT_CA not in final and "PIP_CERT" not in final


def test_base_override_replaces_every_from():
    docker = render(load_stack("cpu"), "docker", base="chexstack-local/debian:bookworm")
    assert re.findall(r"^FROM (\S+)", docker, re.M) == ["chexstack-local/debian:bookworm"] * 2


def test_cpu_horovod_last_no_cache_and_gated():
    """Horovod after TensorFlow, from the wheel whose key the stage computes itself, else compiled with the
    manifest's flags and --no-cache-dir; the gate after either."""
    docker = render(load_stack("cpu"), "docker")
    devel = docker.split("\nFROM ")[1]
    steps = devel.split("\n\n")
    tf = next(i for i, s in enumerate(steps) if "python3 -m venv" in s)
    assert "tensorflow-cpu==2.15.1" in steps[tf]
    hvd = next(i for i, s in enumerate(steps) if "horovod==0.28.1" in s)
    assert tf < hvd
    assert steps[hvd - 1] == "COPY build-only/horovod-wheels /usr/local/share/chexstack-build/horovod-wheels"
    lookup, install = steps[hvd].split(" && \\\n")
    assert lookup.startswith("RUN wheel=$(") and "HOROVOD_WITH_MPI=1" in lookup
    assert "horovod_key.py --horovod 0.28.1 --wheel-in /usr/local/share/chexstack-build/horovod-wheels" in lookup
    cached, compiled = install.split("; else ")
    assert cached.strip() == 'if [ -n "$wheel" ]; then /opt/venv/bin/pip install --no-cache-dir --no-deps "$wheel"'
    assert "--no-cache-dir --no-build-isolation --no-deps horovod==0.28.1; fi" in compiled
    assert "HOROVOD_WITH_MPI=1" in compiled
    gate = "\n\n".join(steps[hvd + 1:])
    assert "python -m facts.horovod_gate --require framework=TensorFlow,controller=MPI,controller=Gloo" in gate


def test_env_values_with_spaces_are_quoted_in_both_formats():
    """hpccm's environment primitive writes K=a b; ours quotes (case 10's GREETING="hello world")."""
    assert parts.quote_value("hello world") == '"hello world"'
    assert parts.quote_value("/opt/venv/bin:$PATH") == "/opt/venv/bin:$PATH"
    assert parts.quote_value('say "hi"') == '"say \\"hi\\""'
    from images.render import hpccm_format
    with hpccm_format("singularity"):
        text = str(parts.env({"GREETING": "hello world"}).primitives[0])
    assert text == '%environment\n    export GREETING="hello world"\n%post\n    export GREETING="hello world"'


def test_unresolved_base_is_refused():
    from chexstack.errors import ChexstackError
    with pytest.raises(ChexstackError, match="unresolved|resolved"):
        render(load_stack("cpu"), "docker", base="nvidia/cuda:${CUDA}-devel")


def test_singularity_copy_destinations_exist_before_files():
    """... made under Docker's umask 0022, as Docker's COPY makes the folders it needs (755)."""
    sing = render(load_stack("cpu"), "singularity")
    assert ("%setup\n    umask 022\n    mkdir -p ${SINGULARITY_ROOTFS}/opt/chexstack\n"
            "%files\n    chexstack/trainer /opt/chexstack/trainer") in sing


def test_context_has_what_the_dockerfile_copies():
    stack = load_stack("cpu")
    docker, ctx = render(stack, "docker"), build_context(stack)
    copied = set(re.findall(r"^COPY (?!--from)(\S+) ", docker, re.M))
    assert copied == {c for c in copied if any(k == c or k.startswith(c + "/") for k in ctx)}
    assert all(any(k == c or k.startswith(c + "/") for c in copied) for k in ctx)


def test_render_does_not_depend_on_what_was_rendered_before():
    """hpccm keeps the distro in global state; every recipe sets its own before its building blocks read it."""
    first = {n: render(load_stack(n), "docker") for n in STACKS}
    again = {n: render(load_stack(n), "docker") for n in reversed(STACKS)}
    assert first == again


def test_conda_installs_from_the_lock_then_horovod_with_its_era_flags():
    docker = render(load_stack("conda"), "docker")
    devel = docker.split("\nFROM ")[1]
    lock, hvd = devel.index("micromamba create -y -p /opt/conda-env -f "), devel.index("horovod==0.16.1")
    assert lock < hvd and "conda install" not in devel and "conda env create" not in devel
    assert "HOROVOD_GPU_ALLREDUCE=NCCL" in devel and "HOROVOD_GPU_OPERATIONS" not in devel
    assert "--check-build" not in devel and "hvd.init()" in devel[hvd:]
    assert "yum install" in devel and "apt-get" not in docker


@pytest.mark.parametrize("fmt", ["docker", "singularity"])
@pytest.mark.parametrize("name", STACKS)
def test_every_image_is_ready_for_an_mpijob(name, fmt):
    """images.mpijob.ssh_setup in the final stage of every family, in both formats, before the code layers."""
    text = render(load_stack(name), fmt)
    final = text.split("\nFROM ")[-1] if fmt == "docker" else text.split("BootStrap: docker")[-1]
    for needle in ("openssh-server", "mkdir -p /var/run/sshd", "ssh-keygen -A", "'StrictModes no' | cat - "
                   "/etc/ssh/sshd_config", "'StrictHostKeyChecking no' 'UserKnownHostsFile /dev/null' | cat - "
                   "/etc/ssh/ssh_config"):
        assert needle in final, needle
    assert final.index("ssh-keygen -A") < final.index("chexstack/trainer")


@pytest.mark.parametrize("text, rule", [
    ("Bootstrap: docker\nFrom: nvcr.io/nvidia/tensorflow:${TAG}\n", "unresolved variable"),
    ("FROM $BASE AS devel\n", "unresolved variable"),
    ("%post\n    su - app -c 'id'\n", "must not become `su -`"),
])
def test_one_lint_refuses_what_no_rendered_definition_may_hold(text, rule):
    """render and convert share ``convert.lint.lint_definition``; the error names the origin, the line and the rule."""
    from convert.lint import lint_definition

    with pytest.raises(ChexstackError, match=rule) as refused:
        lint_definition(text, "Dockerfile.x")
    assert str(refused.value).startswith("Dockerfile.x: rendered line ")
    fine = "FROM debian:bookworm\nRUN su app -c id\n"
    assert lint_definition(fine, "ok") == fine
