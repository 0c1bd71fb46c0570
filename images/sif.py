"""Singularity/Apptainer images (SIF) made from the very Docker image that was verified, verified again inside,
signed, and only then put at their final path.

``build_sif(client, stack, ref, image_id, out_dir, key=None) -> SifBuild``:

1. ``docker save`` of ``image_id`` (the verified image, by ID, not by a tag that could move) into a temporary
   archive, and ``apptainer build`` of ``Bootstrap: docker-archive`` from it (the image's ENV, labels and entry point
   are converted by Apptainer: https://apptainer.org/docs/user/main/docker_and_oci.html), with the labels
   ``org.chexstack.docker.image.id`` (the Docker image ID) and ``org.chexstack.manifest.sha256`` (the manifest's
   SHA-256, ``images.naming.manifest_digest``), into ``<out_dir>/<name>.sif.partial``;
2. signed with the project's key (``signing_key``: ECDSA P-256 PEM, ``apptainer sign --key``; key-based signing:
   https://apptainer.org/docs/user/main/signNverify.html);
3. verified: every Table 1 row and the Horovod build with the same probe and table as the Docker image
   (``images.verify.compare`` on ``probe_sif``: ``apptainer exec --cleanenv``, so only the image's own
   environment counts), both labels read back with ``apptainer inspect --json``, and ``apptainer verify --key``;
4. renamed to ``<out_dir>/<name>.sif`` only when every row matched; a SIF that differs is removed (raises
   ``ChexstackError``, exit 1), never left at the final path.

Through a registry (issue 42 item 5): ``push_oras`` puts a signed SIF in an OCI registry as an ORAS artifact
(``apptainer push SIF oras://REGISTRY/REPO:TAG``: https://apptainer.org/docs/user/main/library_api.html#pushing-
and-pulling-a-container-with-oras), and ``pull_verified`` pulls one on a host and keeps it only when ``apptainer
verify`` passes there with the project's public key: a SIF signed by another key, or unsigned, is removed and
refused (ChexstackError, exit 1) before any job uses it. Apptainer reads the registry's CA from ``SSL_CERT_DIR``
(Go's crypto/x509; the test cluster's is ``CHEXSTACK_REGISTRY_CERT_DIR``).

The launch rows of the Docker verification (sshd, MPIJob) are not judged in a SIF: a SIF runs with the host's
network and init, as the hybrid model's ranks under the host's ``mpirun``.

Errors: ``ChexstackError`` with ``ExitCode.TOOL_MISSING`` when neither ``apptainer`` nor ``singularity`` is on
PATH (checked before minutes of Docker build), ``FAILED`` when a step or the verification fails.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from chexstack import registry
from chexstack.errors import ChexstackError, ExitCode
from chexstack.tools import run, run_checked
from convert.definition import Definition, Section, Stage
from envs.manifest import Stack
from images.labels import DOCKER_IMAGE_ID, MANIFEST_SHA256
from images.naming import manifest_digest
from images.verify import MATCH, MISMATCH, PROBE, ProbeResult, Row, Verification, compare

TOOLS = ("apptainer", "singularity")
INSTALL_HINT = "scripts/setup --apptainer installs Apptainer; or use Docker (--runtime docker)"
#: The project's signing key (made on first use; replace it with your site's: CHEXSTACK_SIF_KEY or --sign-key).
DEFAULT_KEY = Path("build") / "keys" / "sif-signing.pem"
KEY_ENV = "CHEXSTACK_SIF_KEY"
#: A SIF build unpacks and squashes the whole image: minutes for the cpu image on 2 cores.
BUILD_TIMEOUT_S = 3600


@dataclass(frozen=True)
class SifBuild:
    path: Path
    verification: Verification
    key: Path


def require_tool() -> str:
    """Path of ``apptainer`` (else ``singularity``) on PATH; ChexstackError (exit 3) when neither is there."""
    for name in TOOLS:
        path = shutil.which(name)
        if path:
            return path
    raise ChexstackError("--runtime singularity needs apptainer or singularity on PATH; neither was found: %s"
                         % INSTALL_HINT, exit_code=ExitCode.TOOL_MISSING)


def file_sha256(path: str | Path) -> str:
    """The SHA-256 (64 hex digits) of the file at ``path``, read in chunks (``hashlib.file_digest``); OSError when
    it cannot be read. A file read before with the same inode, size and modification time (nanoseconds) is not read
    again: a sweep makes one plan per count and repeat of the same SIF (a GB or more)."""
    st = os.stat(path)
    return _sha256_of(os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _sha256_of(path: str, inode: int, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def sif_path(ref: str, out_dir: Path) -> Path:
    """Where the SIF of the Docker image ``ref`` is written: ``<out_dir>/chexstack_cpu_<tag>.sif``."""
    return out_dir / ("%s.sif" % ref.replace("/", "_").replace(":", "_"))


def public_key(private: Path) -> Path:
    """The public half kept beside a private key: ``X.pem`` -> ``X.pub.pem``."""
    return private.with_name(private.name[:-len(".pem")] + ".pub.pem" if private.name.endswith(".pem")
                             else private.name + ".pub")


def signing_key(path: str | Path | None = None) -> Path:
    """The private key that signs SIFs: ``path``, else ``$CHEXSTACK_SIF_KEY``, else ``DEFAULT_KEY``, which is made
    (ECDSA P-256, PKCS#8 PEM, mode 0600, with its public half ``*.pub.pem``) when absent. A key the user names
    must exist with its public half beside it: ChexstackError naming the file otherwise."""
    chosen = path or os.environ.get(KEY_ENV)
    key = Path(chosen) if chosen else DEFAULT_KEY
    if key.is_file() and public_key(key).is_file():
        return key
    if chosen:
        missing = key if not key.is_file() else public_key(key)
        raise ChexstackError("SIF signing key: %s does not exist (expected a PEM private key with its public key "
                             "beside it as %s)" % (missing, public_key(key).name))
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    key.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    public_key(key).write_bytes(private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return key


def definition(source: Path | str, labels: dict[str, str]) -> str:
    """The definition that turns the image ``source`` into a SIF with ``labels`` (written through the one
    definition model, ``convert.definition``): a registry reference by digest (``REGISTRY/REPO@sha256:…``:
    ``Bootstrap: docker``, which Apptainer pulls from the registry as a site's node would), else the path of a
    ``docker save`` archive, as a Path or as text (``Bootstrap: docker-archive``). ValueError for a registry
    reference without a digest (a tag can move between build and run)."""
    body = tuple("    %s %s" % kv for kv in sorted(labels.items()))
    if registry.is_registry_reference(str(source)):
        ref = registry.parse(str(source))
        if not ref.digest:
            raise ValueError("a SIF is built from a registry image by digest only, not %s" % ref)
        bootstrap, image = "docker", str(ref)
    else:  # a path, given as a Path or as text: the saved archive
        bootstrap, image = "docker-archive", str(Path(source))
    stage = Stage(bootstrap, image, sections=(Section("labels", body=body),))
    return Definition((stage,)).text()


def sif_labels(stack: Stack, image_id: str) -> dict[str, str]:
    """The labels chexstack adds to a SIF: the Docker image ID it came from and the manifest's SHA-256."""
    return {DOCKER_IMAGE_ID: image_id, MANIFEST_SHA256: manifest_digest(stack)}


def _step(argv: list[str], what: str, timeout: float) -> None:
    """``run_checked``, a failure being the build's (exit 1), not the user's input."""
    try:
        run_checked(argv, what, timeout=timeout)
    except ChexstackError as e:
        raise ChexstackError(str(e), exit_code=ExitCode.FAILED) from None


def _save(client, image_id: str, archive: Path) -> None:
    with open(archive, "wb") as f:
        for chunk in client.images.get(image_id).save(named=False):
            f.write(chunk)


def probe_sif(sif: Path) -> ProbeResult:
    """The in-image probe run inside ``sif`` (its error when it could not run)."""
    res = run([require_tool(), "exec", "--cleanenv", "--env", "TF_CPP_MIN_LOG_LEVEL=3", str(sif), "python", PROBE],
              timeout=600)
    if not res.ok:
        return ProbeResult(error=res.why_not())
    try:
        return ProbeResult(output=json.loads(res.stdout))
    except ValueError:
        return ProbeResult(error="probe printed no JSON: %s" % res.stdout[-500:])


def inspect_labels(sif: Path) -> dict[str, str]:
    """The SIF's labels (``apptainer inspect --json``); {} when they cannot be read."""
    res = run([require_tool(), "inspect", "--json", str(sif)], timeout=120)
    try:
        return json.loads(res.stdout)["data"]["attributes"]["labels"] or {}
    except (ValueError, KeyError, TypeError):
        return {}


def sif_rows(sif: Path, wanted: dict[str, str], key: Path) -> list[Row]:
    """One row per chexstack label (read back from the SIF) and one for its signature (``apptainer verify``)."""
    found = inspect_labels(sif)
    rows = [Row("label %s" % k, v, found.get(k, "(absent)"), "apptainer inspect --json",
                MATCH if found.get(k) == v else MISMATCH) for k, v in sorted(wanted.items())]
    res = run([require_tool(), "verify", "--key", str(public_key(key)), str(sif)], timeout=300)
    rows.append(Row("signature", "verified with %s" % public_key(key), "verified" if res.ok else res.why_not(),
                    "apptainer verify --key", MATCH if res.ok else MISMATCH))
    return rows


def verify_sif(stack: Stack, sif: Path, image_id: str, key: Path) -> Verification:
    """Table 1 and Horovod rows from the probe inside ``sif``, then its labels and signature (module docstring)."""
    result = compare(stack, probe_sif(sif))
    return Verification(result.rows + sif_rows(sif, sif_labels(stack, image_id), key), result.probe_error)


def build_sif(client, stack: Stack, ref: str, image_id: str, out_dir: Path, key: str | Path | None = None,
              pulled: str | None = None) -> SifBuild:
    """Build, sign and verify the SIF of the verified Docker image ``image_id`` (module docstring): from the engine's
    copy (``docker save``), or with ``pulled`` (``REGISTRY/REPO@sha256:…``, that image pushed by digest) from the
    registry, Apptainer trusting it as its environment says (``SSL_CERT_DIR``); the same labels and the same Table 1
    verification either way."""
    tool = require_tool()
    key_path = signing_key(key)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = sif_path(ref, out_dir)
    partial = final.with_name(final.name + ".partial")
    try:
        with tempfile.TemporaryDirectory(prefix="chexstack-sif-", dir=out_dir) as tmp:
            recipe = Path(tmp) / "from-docker.def"
            if pulled is None:
                archive = Path(tmp) / "image.tar"
                _save(client, image_id, archive)
            recipe.write_text(definition(archive if pulled is None else pulled, sif_labels(stack, image_id)))
            _step([tool, "build", "--force", str(partial), str(recipe)],
                  "%s build of %s from the Docker image %s" % (os.path.basename(tool), final, pulled or image_id[:19]),
                  BUILD_TIMEOUT_S)
        _step([tool, "sign", "--key", str(key_path), str(partial)], "signing %s" % partial, 300)
        verification = verify_sif(stack, partial, image_id, key_path)
        if not verification.ok:
            return SifBuild(final, verification, key_path)  # the caller prints the table and raises
        os.replace(partial, final)
        return SifBuild(final, verification, key_path)
    finally:
        if partial.exists():
            partial.unlink()


#: The scheme of a SIF in an OCI registry (an ORAS artifact).
ORAS = "oras://"


def push_oras(sif: str | Path, ref: str) -> None:
    """``apptainer push`` of ``sif`` to ``oras://ref`` (``ref``: ``REGISTRY/REPO:TAG``, with or without the
    scheme). ChexstackError (exit 1) with Apptainer's words when the push fails."""
    target = ref if ref.startswith(ORAS) else ORAS + ref
    _step([require_tool(), "push", str(sif), target], "apptainer push of %s to %s" % (sif, target), 1800)


def pull_verified(ref: str, dest: str | Path, key: str | Path | None = None) -> Path:
    """The SIF at ``oras://ref`` pulled to ``dest`` and kept only when ``apptainer verify --key`` passes with the
    public half of ``key`` (``signing_key``: the project's): pulled to ``<dest>.partial``, verified, then renamed.
    ChexstackError (exit 1) naming the reference and Apptainer's words when the pull or the verification fails; a
    SIF that fails verification (signed by another key, unsigned, altered) is removed, never left at ``dest``."""
    tool, source = require_tool(), ref if ref.startswith(ORAS) else ORAS + ref
    public = public_key(signing_key(key))
    dest = Path(dest)
    partial = dest.with_name(dest.name + ".partial")
    try:
        _step([tool, "pull", "--force", str(partial), source], "apptainer pull of %s" % source, 1800)
        checked = run([tool, "verify", "--key", str(public), str(partial)], timeout=300)
        if not checked.ok:
            raise ChexstackError("%s: refused, apptainer verify --key %s fails on the pulled SIF (%s): a SIF that is "
                                 "not signed by that key is never run" % (source, public, checked.why_not()),
                                 exit_code=ExitCode.FAILED)
        os.replace(partial, dest)
        return dest
    finally:
        if partial.exists():
            partial.unlink()
