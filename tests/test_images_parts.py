"""Golden text for every image part, in both formats and, where the part depends on it, for both package families
(hpccm's own style: one assertion per building block, format and distro). A change to one part shows up here as
one small diff, before it shows up inside the whole-recipe goldens of tests/test_images_render.py.

Goldens: ``tests/golden/images/parts/<part>[-<distro>].<Dockerfile|def>``; regenerate with
``CHEXSTACK_UPDATE_GOLDEN=1`` and review.
"""
from __future__ import annotations

import hpccm.config
import pytest

from envs.manifest import load_stack
from images import horovod, mpijob, parts
from images.render import hpccm_format
from tests.lib.golden import assert_golden

#: part name -> a function making it (called inside ``hpccm_format``: building blocks read the distro when made).
PARTS = {
    "base": lambda: parts.base("chexstack-test/base:1", "ubuntu22", "devel"),
    "os-packages": lambda: parts.os_packages(["git", "curl"]),
    "env": lambda: parts.env({"PATH": "/opt/venv/bin:$PATH", "GREETING": "hello world", "Q": 'say "hi"'}),
    "run": lambda: parts.run("echo one", "echo two"),
    "copy-file": lambda: parts.copy_file("chexstack/probe.py", b"print(1)\n", "/opt/chexstack/facts/probe.py"),
    "copy-dir": lambda: parts.copy_dir("chexstack/trainer", {"": parts.REPO / "trainer"}, "/opt/chexstack/trainer"),
    "copy-from-stage": lambda: parts.copy_from_stage("devel", "/opt/venv"),
    "note": lambda: parts.note("a comment"),
    "build-ca": parts.build_ca,
    "chexstack-code": parts.chexstack_code,
    "mpijob-ssh": mpijob.ssh_setup,
    "horovod-pip-cpu": lambda: horovod.pip_install(load_stack("cpu"), "/opt/venv/bin/python", "/opt/venv/bin/pip"),
    "horovod-gate-cpu": lambda: horovod.gate(load_stack("cpu"), "/opt/venv/bin/python"),
    "horovod-gate-ngc": lambda: horovod.gate(load_stack("ngc"), "python"),
}
#: Parts whose text depends on the package manager: rendered for apt (Ubuntu/Debian) and yum (CentOS/RHEL).
BY_DISTRO = {"os-packages", "mpijob-ssh"}
EXT = {"docker": "Dockerfile", "singularity": "def"}


def _cases():
    for name in PARTS:
        for distro in (("ubuntu22", "centos7") if name in BY_DISTRO else ("ubuntu22",)):
            for fmt in EXT:
                yield pytest.param(name, distro, fmt, id="%s-%s-%s" % (name, distro, fmt))


def _text(name: str, distro: str, fmt: str) -> str:
    with hpccm_format(fmt):
        hpccm.config.set_linux_distro(distro)
        return "\n".join(str(p) for p in PARTS[name]().primitives) + "\n"


@pytest.mark.parametrize("name,distro,fmt", list(_cases()))
def test_part_golden(name, distro, fmt):
    suffix = "-%s" % distro if name in BY_DISTRO else ""
    assert_golden("images/parts/%s%s.%s" % (name, suffix, EXT[fmt]), _text(name, distro, fmt))


def test_hpccm_format_restores_hpccm_globals():
    """Rendering leaves hpccm's module globals as it found them (a test or caller that set them keeps them)."""
    before = (hpccm.config.g_ctype, hpccm.config.g_linux_distro, hpccm.config.g_singularity_version)
    with hpccm_format("singularity"):
        hpccm.config.set_linux_distro("centos7")
        assert hpccm.config.g_ctype == hpccm.container_type.SINGULARITY
    assert (hpccm.config.g_ctype, hpccm.config.g_linux_distro, hpccm.config.g_singularity_version) == before
    with pytest.raises(Exception, match="expected one of docker, singularity"):
        with hpccm_format("bash"):
            pass


@pytest.mark.parametrize("remote,url", [
    ("https://github.com/chexstack/chexstack.git", "https://github.com/chexstack/chexstack.git"),
    ("https://user:token@gitlab.example.org:8443/a/b", "https://gitlab.example.org:8443/a/b"),
    ("git@github.com:chexstack/chexstack.git", "https://github.com/chexstack/chexstack.git"),
    ("ssh://git@github.com/chexstack/chexstack", "https://github.com/chexstack/chexstack"),
    ("/work/main", ""),
    ("file:///work/main", ""),
    ("../upstream", ""),
    ("", ""),
])
def test_oci_source_label_is_a_public_url_or_absent(remote, url):
    """``org.opencontainers.image.source`` never names a path of the building machine, never carries credentials."""
    from images.labels import source_url
    assert source_url(remote) == url
