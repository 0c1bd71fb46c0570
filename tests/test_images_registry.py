"""``chexstack.registry`` without a registry: the reference grammar (distribution/reference's), the one-line causes
made from skopeo's real messages (skopeo 1.9.3 against the test cluster's registry, 2026-12-06), ``invoke build
--push`` refusing a bad or registry-less reference before any build, and the build's record read back."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from chexstack.registry import Reference, cause, parse
from images import build as image_build
from tests.lib import cli as cmd

DIGEST = "sha256:feb652c11d48693c74e5461bd914dcdb8bae192c504378f8524751d85f3a5edd"


@pytest.mark.parametrize("text, expected", [
    ("10.213.57.1:5000/chexstack/cpu:v1", Reference("10.213.57.1:5000", "chexstack/cpu", "v1")),
    ("10.213.57.1:5000/chexstack/debian@" + DIGEST, Reference("10.213.57.1:5000", "chexstack/debian", None, DIGEST)),
    ("nvcr.io/nvidia/tensorflow:19.06-py3", Reference("nvcr.io", "nvidia/tensorflow", "19.06-py3")),
    ("localhost/a/b:t@" + DIGEST, Reference("localhost", "a/b", "t", DIGEST)),
    ("chexstack/cpu:0.1.0-3f2a9c1d0b7e", Reference(None, "chexstack/cpu", "0.1.0-3f2a9c1d0b7e")),
    ("chexstack-local/debian:bookworm", Reference(None, "chexstack-local/debian", "bookworm")),
    ("a__b/c-d.e", Reference(None, "a__b/c-d.e")),
])
def test_references_parse_as_distribution_reference_reads_them_and_print_back(text, expected):
    assert parse(text) == expected
    assert str(parse(text)) == text


@pytest.mark.parametrize("text, message", [
    ("10.213.57.1:5000/Chexstack/cpu", "not an image reference"),
    ("UPPER/cpu", "'UPPER' is neither a registry"),
    ("reg.io/a//b", "not an image reference"),
    ("reg.io/a:b:c", "not an image reference"),
    ("reg.io/a@sha256:abc", "digest 'sha256:abc' is not sha256:<64 lowercase hex digits>"),
    ("reg.io/a@md5:" + "0" * 32, "is not sha256"),
    ("reg.io/" + "a" * 260, "longer than 255 characters"),
    ("", "not an image reference"),
])
def test_a_bad_reference_is_an_error_naming_the_option_and_what_was_expected(text, message):
    with pytest.raises(ChexstackError) as e:
        parse(text, "--image")
    assert str(e.value).startswith("--image %r" % text) and message in str(e.value)


def test_a_pinned_reference_names_the_repository_and_the_digest():
    assert parse("10.213.57.1:5000/chexstack/cpu:v1").pinned(DIGEST) == "10.213.57.1:5000/chexstack/cpu@" + DIGEST


# skopeo 1.9.3's own messages, as it printed them here against the test cluster's registry (2026-12-06).
_UNREACHABLE = ('time="2026-12-06T19:33:01Z" level=fatal msg="Error parsing image name \\"docker://10.213.57.1:5999/'
                'chexstack/debian:bookworm\\": pinging container registry 10.213.57.1:5999: Get \\"https://10.213.57.1'
                ':5999/v2/\\": dial tcp 10.213.57.1:5999: connect: connection refused"')
_UNTRUSTED = ('time="2026-12-06T19:33:04Z" level=fatal msg="trying to reuse blob sha256:205a8ae5f4f23d0fd2b4c2b70a5b7'
              '3e49d7dcce7a78962d0e61a04da1e8754d8 at destination: pinging container registry 10.213.57.1:5000: Get '
              '\\"https://10.213.57.1:5000/v2/\\": x509: certificate signed by unknown authority"')
_NO_SUCH = ('time="2026-12-06T19:33:01Z" level=fatal msg="Error parsing image name \\"docker://10.213.57.1:5000/chexsta'
            'ck/debian@sha256:0000000000000000000000000000000000000000000000000000000000000000\\": reading manifest '
            'sha256:0000000000000000000000000000000000000000000000000000000000000000 in 10.213.57.1:5000/chexstack/'
            'debian: manifest unknown: manifest unknown"')


@pytest.mark.parametrize("stderr, starts", [
    (_UNREACHABLE, "it cannot be reached (pinging container registry 10.213.57.1:5999: Get \"https://"),
    (_UNTRUSTED, "its TLS certificate is not trusted here (put its CA in /etc/docker/certs.d/10.213.57.1:5000/ca.crt)"),
    (_NO_SUCH, "it has no such image (reading manifest sha256:0000"),
    ("Error: unauthorized: authentication required", "it refused the credentials (docker login 10.213.57.1:5000)"),
])
def test_skopeo_s_messages_become_one_cause(stderr, starts):
    assert cause(stderr, "10.213.57.1:5000").startswith(starts)


@pytest.mark.parametrize("target, message", [
    ("chexstack/cpu:v1", "--push 'chexstack/cpu:v1': names no registry"),
    ("10.213.57.1:5000/chexstack/cpu@" + DIGEST, "a push names a tag, not a digest"),
    ("10.213.57.1:5000/Chexstack", "--push '10.213.57.1:5000/Chexstack': not an image reference"),
])
def test_build_push_refuses_a_bad_reference_before_building(target, message):
    ran = cmd.run("build", "--stack", "cpu", "--push", target, expect=2)
    assert message in ran.stderr and ran.stderr.count("error:") == 1
    assert "building" not in ran.stdout


def test_the_build_record_is_written_whole_and_read_back(tmp_path):
    record = image_build.BuildRecord("cpu", "chexstack/cpu:0.1.0-abc", "sha256:" + "1" * 64, True,
                                     "10.213.57.1:5000/chexstack/cpu@" + DIGEST, "10.213.57.1:5000/chexstack/cpu:v1",
                                     DIGEST)
    path = image_build.write_record(record, tmp_path)
    assert path.name == "chexstack_cpu_0.1.0-abc.json" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert image_build.pushed_reference("chexstack/cpu:0.1.0-abc", tmp_path) == record.pushed
    assert image_build.pushed_reference("chexstack/cpu:other", tmp_path) is None


def _pinned_spec(image_from):
    from envs.manifest import load_stack
    from launch.job import JobSpec, Mount

    return JobSpec(name="chexstack-cxr", stack=load_stack("cpu"), image="10.213.57.1:5000/chexstack/cpu@" + DIGEST,
                   nodes=1, ranks_per_node=2, gpus=False, image_from=image_from,
                   trainer_args=("--data", "synthetic", "--output", "/out"), mounts=(Mount("/scratch/out", "/out"),))


def test_a_pinned_image_is_rendered_by_digest_with_its_tag_beside_it():
    from launch import k8s, slurm
    from tests.lib.golden import assert_golden

    mpijob = k8s.render(_pinned_spec("10.213.57.1:5000/chexstack/cpu:v1"), k8s.K8sOptions())
    assert_golden("launch/mpijob-1x2cpu-pinned.yaml", mpijob)
    pyxis = slurm.render(_pinned_spec("10.213.57.1:5000/chexstack/cpu:v1"), "pyxis")
    assert_golden("launch/slurm-pyxis-1x2cpu-pinned.sbatch", pyxis)
    assert "--container-image=10.213.57.1:5000#chexstack/cpu@%s" % DIGEST in pyxis


def test_without_image_the_local_tag_becomes_the_digest_its_push_recorded(tmp_path, monkeypatch):
    from envs.manifest import load_stack
    from images.naming import image_ref
    from launch.cluster import pinned_image

    stack = load_stack("cpu")
    monkeypatch.chdir(tmp_path)
    assert pinned_image(stack, image_ref(stack), None) == (image_ref(stack), None)
    pushed = "10.213.57.1:5000/chexstack/cpu@" + DIGEST
    image_build.write_record(image_build.BuildRecord("cpu", image_ref(stack), "sha256:" + "1" * 64, True, pushed,
                                                     "10.213.57.1:5000/chexstack/cpu:v1", DIGEST))
    assert pinned_image(stack, image_ref(stack), None) == (pushed, image_ref(stack))
    assert pinned_image(stack, "/shared/cpu.sif", "/shared/cpu.sif") == ("/shared/cpu.sif", None)
    assert pinned_image(stack, pushed, pushed) == (pushed, None)  # by digest: as given, nothing resolved
