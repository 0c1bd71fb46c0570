"""``invoke convert`` on the field's real Dockerfiles (issue 45; ../shared/convert-corpus: 39 files of NVIDIA's
DeepLearningExamples, Horovod, Apptainer, micromamba-docker and spython's own test inputs, each as its repository
holds it, and ``repro/<x>/Dockerfile``, one minimal file per fault the README lists).

Every file goes through the command itself (``tests/lib/cli.py``, in process) with the build arguments the README
gives, reading no engine (``convert.base.OFFLINE``: the bases are not in this engine, and a test depends on the
Dockerfile's text alone). Each converts, or is refused for a reason that really applies, and the refusals are counted
by reason (``REFUSALS``): the count may shrink, never grow.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from convert import dockerfile as dockerfile_module
from convert.base import OFFLINE
from convert.dockerfile import HELPERS
from tests.lib import cli as cmd
from tests.lib.paths import FIELD_DOCKERFILES

REPRO = FIELD_DOCKERFILES / "repro"
#: The README's build arguments: micromamba's files build FROM $BASE_IMAGE (debian:12-slim in its CI), and its
#: modify-username test FROM the micromamba image, with the new user's name and ids of its test/user.bats.
BUILD_ARGS = {
    "mamba-org_micromamba-docker__test_modify-username": ["BASE_IMAGE=mambaorg/micromamba:latest",
                                                          "NEW_MAMBA_USER=testuser", "NEW_MAMBA_USER_ID=1100",
                                                          "NEW_MAMBA_USER_GID=2200", "MAMBA_USER_ID=1100"],
    "mamba-org_micromamba-docker__": ["BASE_IMAGE=debian:12-slim"],
}
#: Why a field file is refused (a phrase of the refusal) -> at most how many of the 39 are: only what an Apptainer
#: build cannot reproduce. FROM a stage with instructions (an Apptainer stage starts from an image), FROM scratch
#: (no shell for %post), HEALTHCHECK (Apptainer has no health checks).
REFUSALS = {"FROM a previous stage": 1, "FROM scratch": 1, "has no health checks": 1}


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    monkeypatch.setattr(dockerfile_module, "default_reader", lambda *args, **kwargs: OFFLINE)


def field_files() -> list[Path]:
    return sorted(FIELD_DOCKERFILES.glob("*.Dockerfile"))


def build_args(path: Path) -> list[str]:
    name = path.name.removesuffix(".Dockerfile").removesuffix(".Dockerfile")
    key = next((k for k in BUILD_ARGS if name.startswith(k)), None)
    return [a for arg in BUILD_ARGS.get(key, []) for a in ("--build-arg", arg)]


def convert(path: Path, *args: str) -> cmd.Ran:
    return cmd.run("convert", str(path), *args)


def reason(message: str) -> str:
    return next((r for r in REFUSALS if r in message), message)


def test_the_field_files_are_here():
    assert len(field_files()) == 39 and len(list(REPRO.glob("*/Dockerfile"))) == 8


def test_the_field_converts_and_refuses_only_what_cannot_be_reproduced():
    """Every file converts (exit 0, the summary line last) or is refused in one ``error: FILE:LINE`` line (exit 2)
    for a reason of ``REFUSALS``, each no more often than counted there."""
    refused: dict[str, int] = {}
    for path in field_files():
        p = convert(path, *build_args(path))
        if p.returncode == 0:
            assert p.stdout.startswith("# Converted from %s" % path.name), path
            assert p.stderr.strip().split("\n")[-1].startswith("summary: "), (path, p.stderr)
            continue
        assert p.returncode == 2, (path, p.stderr)
        assert re.match(r"^error: %s:\d+: " % re.escape(str(path)), p.stderr) and p.stderr.count("\n") == 1, p.stderr
        refused[reason(p.stderr)] = refused.get(reason(p.stderr), 0) + 1
    grown = {r: n for r, n in refused.items() if n > REFUSALS.get(r, 0)}
    assert not grown, "refusals grew (reason -> count): %s" % grown


def _definition(path: Path, *args: str) -> tuple[str, str]:
    p = convert(path, *args)
    assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr


def _sh(script: str, env: dict | None = None) -> str:
    return subprocess.run(["sh", "-c", script], env=env or {}, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("repro", ["a", "d"])
def test_f2_env_path_again_reads_the_earlier_export(repro):
    """``ENV PATH=/a/bin:$PATH`` then ``ENV PATH=/b/bin:$PATH``: exported in order, at build and at run time."""
    text, _ = _definition(REPRO / repro / "Dockerfile")
    environment = text.split("%environment\n")[1].split("\n%")[0]
    exports = [line for line in environment.split("\n") if line.startswith("export PATH=")]
    assert len(exports) == 2
    base = "/usr/bin:/bin"
    value = _sh("PATH=%s; %s; printf %%s \"$PATH\"" % (base, "; ".join(exports)))
    want = {"a": "/b/bin:/a/bin:" + base, "d": "/opt/conda/bin:%s:/usr/local/nvidia/bin" % base}[repro]
    assert value == want


@pytest.mark.parametrize("base, expected", [(None, "/usr/local/nvidia/lib64"),
                                            ("", "/usr/local/nvidia/lib64"),
                                            ("/x", "/x:/usr/local/nvidia/lib64")])
def test_f3_a_nested_word_expands_as_docker_does(base, expected):
    text, _ = _definition(REPRO / "b" / "Dockerfile")
    line = next(x for x in text.split("\n") if x.startswith("export LD_LIBRARY_PATH="))
    env = {} if base is None else {"LD_LIBRARY_PATH": base}
    assert _sh('%s; printf %%s "$LD_LIBRARY_PATH"' % line, env) == expected


def test_f1_the_converters_stage_names_never_collide_with_a_users():
    text, _ = _definition(REPRO / "c" / "Dockerfile")
    assert re.findall(r"^Stage: (.*)$", text, re.M) == ["stage1", "stage1-1"]


def test_f4_a_url_with_a_query_is_no_pattern():
    text, _ = _definition(REPRO / "h" / "Dockerfile")
    assert "chexstack_fetch 'https://example.org/api/data?format=json' /opt/data.json" in text


def test_s5_automatic_platform_args_get_the_builders_values():
    """``ARG TARGETARCH`` in a stage: BuildKit's value for a native build, computed where the image is built."""
    text, _ = _definition(REPRO / "e" / "Dockerfile")
    assert 'export TARGETARCH="$(chexstack_platform TARGETARCH)"' in text
    machine = _sh("uname -m").strip()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine)
    if arch is None:
        pytest.skip("no BuildKit value known here for %s" % machine)
    got = _sh(HELPERS["platform"] + "\nchexstack_platform TARGETARCH; chexstack_platform TARGETPLATFORM",
              {"PATH": "/usr/bin:/bin"})
    assert got.split() == [arch, "linux/" + arch]


def test_s6_copy_from_a_link_copies_what_it_points_to(tmp_path):
    """BuildKit follows a COPY --from source that is a link; the links inside a folder stay links."""
    text, _ = _definition(REPRO / "f" / "Dockerfile")
    assert "chexstack_pack / link /.chexstack-from-4-1.tar" in text
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "real").write_text("hi\n")
    (src / "link").symlink_to("real")
    (src / "d" / "in").symlink_to("../real")
    for n in (1, 2):
        (tmp_path / ("s%d" % n)).mkdir()
    _sh("%s\n%s\n%s\nchexstack_pack \"$S\" link \"$T/s1/link.tar\" && chexstack_pack \"$S\" d \"$T/s2/d.tar\"\n"
        "chexstack_from \"$T/s1/link.tar\" \"$T/out/l\" && chexstack_from \"$T/s2/d.tar\" \"$T/out/d\""
        % (HELPERS["copy"], HELPERS["pack"], HELPERS["from"]), {"PATH": "/usr/bin:/bin", "S": str(src),
                                                                "T": str(tmp_path)})
    assert not (tmp_path / "out" / "l").is_symlink() and (tmp_path / "out" / "l").read_text() == "hi\n"
    assert (tmp_path / "out" / "d" / "in").is_symlink()


def test_f7_a_pattern_in_copy_from_is_matched_where_the_files_are(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12 AS sdk\nRUN mkdir /w && touch /w/t-$(uname -m).whl\n"
                  "FROM debian:12\nCOPY --from=sdk /w/t-*.whl /dlrm/\n")
    text, _ = _definition(df)
    assert "chexstack_pack /w t-*.whl /.chexstack-from-4-1.tar" in text
    assert "chexstack_from /.chexstack-copy-4-1/matches.tar /dlrm/" in text


def test_f8_a_bind_mount_from_a_stage_is_the_stages_files(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12 AS build\nRUN mkdir /out && touch /out/a.whl\n"
                  "FROM debian:12\nRUN --mount=type=bind,from=build,source=/out,target=/wheels ls /wheels\n")
    text, err = _definition(df)
    assert ("chexstack_mount /wheels /.chexstack-copy-hidden-4-0\nchexstack_bind /.chexstack-copy-4-m1/out.tar "
            "/wheels\nls /wheels\nchexstack_unmount /wheels") in text
    assert "RUN bind mount: 1" in err.strip().split("\n")[-1]


def test_f6_from_platform_naming_the_builder(tmp_path):
    df = tmp_path / "Dockerfile"
    for flag in ("--platform=$BUILDPLATFORM", "--platform=${TARGETPLATFORM}"):
        df.write_text("FROM %s debian:12\nRUN true\n" % flag)
        text, _ = _definition(df)
        assert "chexstack_platform" not in text
    df.write_text("FROM --platform=linux/amd64 debian:12\nRUN true\n")
    text, _ = _definition(df)
    assert '[ "$(chexstack_platform BUILDPLATFORM)" = linux/amd64 ] || {' in text
    df.write_text("FROM --platform=$SOMETHING debian:12\nRUN true\n")
    p = convert(df)
    assert p.returncode == 2 and "write --platform=$BUILDPLATFORM" in p.stderr


def test_f5_a_name_only_the_unread_base_defines_is_refused_naming_the_base(tmp_path):
    """USER/--chown naming the base's ENV (micromamba's $MAMBA_USER) is a sign the build depends on the base's SHELL,
    USER and WORKDIR too (../shared/cases 52): where the config is read it is reproduced
    (``tests/test_convert_base.py``); not read, refused naming the base and what makes it convertible."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM mambaorg/micromamba:1\nUSER $MAMBA_USER\nRUN id\n")
    p = convert(df)
    assert p.returncode == 2
    assert "the build depends on the base image mambaorg/micromamba:1's config" in p.stderr
    assert "`docker pull mambaorg/micromamba:1` into the local engine" in p.stderr


def test_cmd_without_entrypoint_and_workdir_runscripts_take_the_bootstrapped_entrypoint(tmp_path):
    """The base's config not read: the runscript runs the ENTRYPOINT Apptainer's bootstrap recorded, with the CMD
    (or the base's CMD), in the WORKDIR (S1: `docker run` starts there)."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12\nWORKDIR /srv\n")
    text, err = _definition(df)
    runscript = text.split("%runscript\n")[1].split("\n%")[0]
    assert runscript.startswith("cd /srv\n") and 'eval "set -- $OCI_CMD"' in runscript
    assert err.strip().split("\n")[-1].endswith("`apptainer run` starts in /srv as the invoking host user and runs "
                                                 "the base image's ENTRYPOINT (read at build time) with ARGS, else "
                                                 "the base image's CMD")
    # the runscript as Apptainer runs it, with what the bootstrap recorded of an image
    run = tmp_path / "base-run.sh"
    run.write_text("OCI_ENTRYPOINT='\"printf\" \"%s|\"'\nOCI_CMD='\"a b\" \"c\"'\n")
    script = runscript.replace("/.singularity.d/chexstack-base-run.sh", str(run)).replace("cd /srv", "cd /")
    assert _sh(script) == "a b|c|"
    assert subprocess.run(["sh", "-c", script, "sh", "x y"], capture_output=True, text=True).stdout == "x y|"


def test_an_empty_alias_stage_is_its_image(tmp_path):
    df = tmp_path / "Dockerfile"
    df.write_text("FROM debian:12 AS base\nFROM base\nRUN true\n")
    text, _ = _definition(df)
    assert re.findall(r"^From: (.*)$", text, re.M) == ["debian:12"]


def test_the_summary_names_the_warnings_by_kind_and_the_run():
    _, err = _definition(REPRO / "g" / "Dockerfile")
    assert err.strip().split("\n")[-1] == (
        "summary: 1 warning (base config not read: 1); `apptainer run` runs the base "
        "image nvcr.io/nvidia/pytorch:22.11-py3's own runscript (its ENTRYPOINT/CMD as Apptainer's bootstrap "
        "recorded them) in the host's current folder, as the invoking host user")

