"""``invoke build``: render -> Docker build (untagged) -> verify inside the image (Table 1 rows, Horovod, launch
requirements) -> tag -> optional SIF (``images.sif``: made from the verified image, verified inside with the same table,
signed, and put at ``build/sif/`` only when every row matched).

A failed build or verification leaves no tag: the image is built untagged and ``images.naming.image_ref(stack)``
(or ``--tag``) is applied only after every row matched. ``--allow-mismatch`` tags anyway, with the mismatches in
the image label ``org.chexstack.verification.mismatches``. Exit codes (``ChexstackError.exit_code``): 1 build or
verification failed, 2 bad input, 3 a required tool is missing.

``--push HOST[:PORT]/PATH[:TAG]`` (``chexstack.registry``): the registry is checked before the build (reachable,
trusted TLS, credentials accepted); after the image verified (never one whose verification failed, also not one
kept by ``--allow-mismatch``) the engine's image (by ID) is copied there, and its digest
printed and written in the build's record, ``build/records/<local tag>.json`` (``BuildRecord``; written whole only
after the push succeeded, so a failed push leaves no record, never a partial one). ``pushed_reference(local_ref)``
reads the record back: the ``repo@sha256:…`` a push fixed for that local tag. With a SIF asked too
(``--runtime singularity|all``), the SIF is then built from the registry by that digest, as a site's node pulls
it (``images.sif.build_sif(pulled=…)``), and verified with the same table as one built from the engine's copy.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import docker.errors

from chexstack import registry
from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from envs.manifest import load_stack
from images import context, labels, oci, sif
from images.docker_build import docker_build, docker_client
from images.naming import image_ref
from images.render import build_context, render
from images.verify import Verification, compare, launch_report, print_table, probe_image

RUNTIMES = {"docker": ("docker",), "singularity": ("docker", "singularity"), "all": ("docker", "singularity")}
SIF_DIR = Path("build") / "sif"
RECORDS_DIR = Path("build") / "records"


@dataclass
class BuildResult:
    image_id: str | None
    ref: str
    tagged: bool
    verification: Verification | None = None
    sif: Path | None = None
    #: ``repo@sha256:…`` in the registry of ``--push`` (None without)
    pushed: str | None = None


@dataclass(frozen=True)
class BuildRecord:
    """What a build with ``--push`` fixed (``build/records/<local tag>.json``): the stack, the local tag and image
    ID that verified, and where it went: ``pushed`` (``repo@sha256:…``), ``pushed_tag`` (``repo:tag``) and
    ``digest`` (the manifest's ``sha256:…`` in that registry)."""

    stack: str
    image: str
    image_id: str
    verified: bool
    pushed: str
    pushed_tag: str
    digest: str


def record_path(local_ref: str, records_dir: Path = RECORDS_DIR) -> Path:
    """The record file of the local tag ``local_ref`` (``/`` and ``:`` made ``_``)."""
    return Path(records_dir) / ("%s.json" % re.sub(r"[/:@]", "_", local_ref))


def write_record(record: BuildRecord, records_dir: Path = RECORDS_DIR) -> Path:
    """Write ``record`` whole (a temporary file renamed into place): never a partial record."""
    path = record_path(record.image, records_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(asdict(record), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def pushed_reference(local_ref: str, records_dir: Path = RECORDS_DIR) -> str | None:
    """``repo@sha256:…`` that ``invoke build --push`` recorded for the local tag ``local_ref``, else None."""
    path = record_path(local_ref, records_dir)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    pushed = data.get("pushed") if isinstance(data, dict) else None
    return pushed if isinstance(pushed, str) and "@sha256:" in pushed else None


def push_verified(built: BuildResult, target: registry.Reference, records_dir: Path = RECORDS_DIR,
                  stack: str = "") -> BuildResult:
    """Push the image of ``built`` to ``target`` and write its record; refused (ChexstackError, exit 1, nothing
    pushed) unless ``built`` is tagged and its verification ok. RegistryError (exit 2, no record) when the push
    fails."""
    if built.image_id is None or not built.tagged or built.verification is None or not built.verification.ok:
        raise ChexstackError("--push refused: %s did not verify (%s); nothing was pushed to %s"
                             % (built.ref, "mismatches: %d row(s)" % len(built.verification.mismatches())
                                if built.verification is not None else "no verification", target.domain),
                             exit_code=ExitCode.FAILED)
    console.print("[bold]pushing[/] %s (%s) to %s" % (built.ref, built.image_id[:19], target), soft_wrap=True)
    digest = registry.push(built.image_id, target)
    pinned = target.pinned(digest)
    tag = target.tag or "latest"
    record = BuildRecord(stack or built.ref, built.ref, built.image_id, True, pinned, "%s:%s" % (target.name, tag),
                         digest)
    path = write_record(record, records_dir)
    built.pushed = pinned
    console.print("[bold green]pushed[/] %s (tag %s:%s; record %s)" % (pinned, target.name, tag, path),
                  soft_wrap=True)
    return built


def pinned_base(base: str | None) -> str | None:
    """``base`` as the build's FROM: a registry reference by tag resolved now to ``repo@sha256:…`` (the engine then
    pulls exactly that manifest; ``chexstack.registry.resolve``, RegistryError when the registry cannot be used), one
    by digest as given; a local name (no registry) as given."""
    if not base or not registry.is_registry_reference(base):
        return base
    ref = registry.parse(base, "--base")
    if ref.digest:
        return base
    pinned = ref.pinned(registry.resolve(ref))
    console.print("base %s resolved to %s" % (base, pinned), markup=False, highlight=False, soft_wrap=True)
    return pinned


def _base_digest(client: docker.DockerClient, base_ref: str, pinned: str | None) -> str | None:
    """The manifest's pin, else the digest a registry reference names (the engine pulls it), else the local base
    image's registry digest, else its image ID (None if absent)."""
    if pinned:
        return pinned
    if "@sha256:" in base_ref and registry.is_registry_reference(base_ref):
        return base_ref.rsplit("@", 1)[1]
    try:
        img = client.images.get(base_ref)
    except docker.errors.ImageNotFound:
        warn("base image %s is not present locally; the engine will try to pull it "
             "(without a registry: --base IMAGE names a local stand-in)" % base_ref)
        return None
    digests = img.attrs.get("RepoDigests") or []
    return digests[0].split("@", 1)[1] if digests else img.id


def _tag(client: docker.DockerClient, image_id: str, ref: str) -> None:
    repo, _, tag = ref.rpartition(":")
    client.api.tag(image_id, repo, tag)


def _with_mismatches(client: docker.DockerClient, image_id: str, result: Verification) -> str:
    """The image plus a label listing the mismatches (a metadata-only build ``FROM`` the image ID)."""
    tar = context.context_tar("FROM %s\n" % image_id, {})
    return docker_build(client, tar, labels={labels.MISMATCHES: json.dumps(result.mismatches())}, quiet=True)


def _dry_run(dockerfile: str, ctx: dict, lab: dict, ref: str, runtimes: tuple[str, ...]) -> BuildResult:
    console.print("[bold]Dockerfile[/]")
    console.print(dockerfile, markup=False, highlight=False, soft_wrap=True)  # exact text, never re-wrapped
    console.print("[bold]build context[/]")
    for name, size in context.listing(ctx):
        console.print("  %-60s %9d bytes" % (name, size), markup=False, highlight=False, soft_wrap=True)
    console.print("[bold]labels[/]")
    for k, v in sorted(lab.items()):
        console.print("  %s=%s" % (k, v if len(v) < 100 else v[:97] + "..."), markup=False, soft_wrap=True)
    console.print("[bold]would build[/] untagged, verify inside, then tag %s%s"
                  % (ref, "; then make a SIF" if "singularity" in runtimes else ""))
    return BuildResult(None, ref, False)


def build(stack_name: str, *, runtime: str = "docker", tag: str | None = None, base: str | None = None,
          no_cache: bool = False, dry_run: bool = False, allow_mismatch: bool = False,
          sif_dir: Path = SIF_DIR, sign_key: str | None = None, push: str | None = None,
          records_dir: Path = RECORDS_DIR, bundle: str | None = None) -> BuildResult:
    """Build, verify and tag the image of ``stack_name``, then push it when ``push`` names a registry reference
    (see the module docstring); ``bundle``: also the OCI runtime bundle of the verified image at that folder
    (``images.oci.make_bundle``: Slurm's ``srun --container``), refused for an image kept despite mismatches."""
    stack = load_stack(stack_name)
    target = registry.require_registry(registry.parse(push, "--push"), "--push") if push else None
    if target is not None and target.digest:
        raise ChexstackError("--push %r: a push names a tag, not a digest (the registry gives the digest)" % push)
    if runtime not in RUNTIMES:
        raise ChexstackError("--runtime %r: expected one of %s" % (runtime, ", ".join(RUNTIMES)))
    runtimes = RUNTIMES[runtime]
    if bundle:  # before minutes of Docker build: a folder already there, then the tools
        if os.path.lexists(bundle):
            raise ChexstackError("--bundle %s: already exists; remove it or name a new folder" % bundle)
        oci.require_tools()
    if "singularity" in runtimes:
        sif.require_tool()  # before minutes of Docker build
        sif.signing_key(sign_key)  # a key the user names must exist, also before the build
    base_ref = pinned_base(base) or stack.base.reference  # a registry tag resolved: FROM repo@sha256:…
    ref = tag or image_ref(stack)
    if ":" not in ref.rsplit("/", 1)[-1]:
        raise ChexstackError("--tag %r: expected REPOSITORY:TAG" % ref)
    dockerfile, ctx = render(stack, "docker", base_ref), build_context(stack, base_ref)
    context.expand(ctx)  # a missing input (e.g. the conda lock) stops here, before anything is printed or built
    if dry_run:
        return _dry_run(dockerfile, ctx, labels.image_labels(stack, base_ref, stack.base.digest), ref, runtimes)
    if target is not None:
        registry.check_reachable(target)  # before minutes of build

    client = docker_client()
    lab = labels.image_labels(stack, base_ref, _base_digest(client, base_ref, stack.base.digest))
    console.print("[bold]building[/] stack %s FROM %s (untagged until verified)" % (stack.name, base_ref),
                  soft_wrap=True)
    image_id = docker_build(client, context.context_tar(dockerfile, ctx), labels=lab, nocache=no_cache)
    console.print("[bold]built[/] %s; verifying inside the image" % image_id, soft_wrap=True)

    result = compare(stack, probe_image(client, image_id), launch_report(client, image_id))
    print_table(stack, ref, result)
    if not result.ok and target is not None:
        raise ChexstackError("verification failed: %d row(s) differ from envs/stacks/%s.yaml; --push refused, "
                             "nothing was pushed to %s; image %s left untagged"
                             % (len(result.mismatches()) or 1, stack.name, target.domain, image_id[:19]),
                             exit_code=ExitCode.FAILED)
    if not result.ok and not allow_mismatch:
        raise ChexstackError("verification failed: %d row(s) differ from envs/stacks/%s.yaml; image %s left "
                             "untagged (--allow-mismatch keeps it, tagged, with the mismatches in a label)"
                             % (len(result.mismatches()) or 1, stack.name, image_id[:19]), exit_code=ExitCode.FAILED)
    if not result.ok:
        image_id = _with_mismatches(client, image_id, result)
        console.print("[yellow]kept despite mismatches[/] (label %s)" % labels.MISMATCHES)
    _tag(client, image_id, ref)
    console.print("[bold green]tagged[/] %s (%s)" % (ref, image_id[:19]))

    out = BuildResult(image_id, ref, True, result)
    if bundle:
        if not result.ok:
            raise ChexstackError("--bundle: image %s was kept despite mismatches; an OCI bundle is made from a "
                                 "verified image only" % ref)
        made_bundle = oci.make_bundle(ref, bundle)
        console.print("[bold green]OCI bundle[/] %s of %s (OCI manifest digest %s)"
                      % (made_bundle.bundle, ref, made_bundle.digest), soft_wrap=True)
    if target is not None:  # pushed first: the SIF is then built from the registry by digest, as a node pulls it
        push_verified(out, target, records_dir, stack.name)
    if "singularity" in runtimes:
        console.print("[bold]making the SIF[/] of %s%s; verifying inside it"
                      % (image_id[:19], " from %s" % out.pushed if out.pushed else ""), soft_wrap=True)
        made = sif.build_sif(client, stack, ref, image_id, sif_dir, sign_key, pulled=out.pushed)
        print_table(stack, str(made.path), made.verification)
        if not made.verification.ok:
            raise ChexstackError("SIF verification failed: %d row(s) differ; the SIF was removed (the Docker image "
                                 "%s stays tagged: it matched)" % (len(made.verification.mismatches()) or 1, ref),
                                 exit_code=ExitCode.FAILED)
        out.sif = made.path
        console.print("[bold green]SIF[/] %s signed with %s (label %s=%s)"
                      % (out.sif, made.key, labels.DOCKER_IMAGE_ID, image_id), soft_wrap=True)
    return out
