"""Horovod checks: what the Horovod of this environment and of the stack's image was built with (frameworks,
controllers, tensor operations; era-aware), whether it was built for the TensorFlow it imports, and whether the
controller can run over this node's network interfaces.

* ``horovod.env``: this project's environment (the interpreter running chexstack). It asks Horovod's Python API in
  one interpreter (``facts.horovod_gate.import_probe``) — ``horovodrun --check-build`` gives the same marks but
  starts one interpreter per framework and controller (~20 s here); the tests run it for real.
* ``horovod.image``: the stack's built image, through ``images.verify`` (the in-image probe; ``--check-build``
  from 0.17.0, import + ``hvd.init()`` before). The image must exist; otherwise the SKIP names ``invoke build``.
* ``horovod.controller``: Gloo needs a non-loopback interface; with only ``lo`` its ranks die with SIGSEGV
  (exit 139) while MPI works (observed here: Horovod 0.28.1 + TensorFlow 2.15.1 in a container whose only interface is
  loopback).
"""
from __future__ import annotations

from facts import horovod_gate
from facts.faults_table import remedy
from facts.parsers.horovod import (
    CheckBuild,
    TFMismatch,
    build_from_api,
    format_missing,
    parse_requirements,
    tf_mismatch,
)
from facts.parsers.horovodrun import CHECK_BUILD, HOROVOD_IMPORT
from facts.parsers.observation import Observed
from launch.controller import pick_controller
from validate.checks.container import no_stack_image, stack_image
from validate.checks.network import interfaces
from validate.checks.registry import Context, check
from validate.result import CheckResult, failed, passed, skipped, warned

#: The build variable that makes Horovod's build fail loudly instead of silently skipping a component.
_WITH = {("framework", "TensorFlow"): "HOROVOD_WITH_TENSORFLOW=1", ("framework", "PyTorch"): "HOROVOD_WITH_PYTORCH=1",
         ("controller", "MPI"): "HOROVOD_WITH_MPI=1", ("controller", "Gloo"): "HOROVOD_WITH_GLOO=1",
         ("tensor_op", "NCCL"): "HOROVOD_GPU_OPERATIONS=NCCL"}


def rebuild_hint(missing: list[tuple[str, str]]) -> str:
    flags = " ".join(dict.fromkeys(_WITH.get(kn, "") for kn in missing if kn in _WITH))
    return ("rebuild with %s pip install --no-cache-dir horovod (HOROVOD_WITH_* make the build fail loudly instead "
            "of skipping a component; before 0.20 use HOROVOD_GPU_ALLREDUCE=NCCL) and run horovodrun "
            "--check-build as a RUN step of the image" % flags)


def judge_build(build: CheckBuild, required: list[tuple[str, str]], tf_version: str | None = None,
                built_for: str | None = None, where: str = "this environment") -> CheckResult:
    """Every required component marked built (https://github.com/horovod/horovod/issues/3858: the message lists exactly
    what is missing;
    ``[X]`` on other components does not count) and Horovod built for the TensorFlow imported (horovod/horovod#2619)."""
    cid = "horovod.env"
    want = ", ".join("%s=%s" % kn for kn in required)
    if build.problems:
        return failed(cid, "could not read Horovod's build in %s: %s" % (where, "; ".join(build.problems)),
                      want, "run horovodrun --check-build by hand", "OUTPUT_UNREADABLE")
    missing = build.missing(required)
    if missing:
        return failed(cid, "Horovod v%s in %s: %s" % (build.version, where, format_missing(missing)), want,
                      rebuild_hint(missing), "HOROVOD_BUILD_INCOMPLETE")
    if built_for and tf_version and built_for != tf_version:
        return judge_tf_mismatch(TFMismatch(built_for, tf_version, ""))
    return passed(cid, "Horovod v%s: %s%s" % (build.version, want, ", built for TensorFlow %s" % built_for
                                              if built_for else ""), want)


#: What every stack's Horovod needs whatever its build flags say: the trainer is TensorFlow's (``python -m trainer``)
#: and every launcher starts ranks under MPI (``horovodrun --mpi``, ``mpirun``, ``srun --mpi=pmix``, the MPIJob's
#: ``mpirun``). A stack's ``build.horovod_env`` adds to it; a prebuilt image's (NGC) is empty and adds nothing.
BASELINE = (("framework", "TensorFlow"), ("controller", "MPI"))
#: The order ``horovodrun --check-build`` prints its sections in, for the list of what is missing.
_KINDS = ("framework", "controller", "tensor_op")


def judge_tf_mismatch(mismatch: TFMismatch) -> CheckResult:
    """Horovod built for another TensorFlow than the one it imports (horovod/horovod#2619; before 0.21 an undefined
    TensorFlow symbol, horovod/horovod#898): both versions where they were observed, and Horovod reinstalled last."""
    cid = "horovod.env"
    if mismatch.built_for and mismatch.found:
        measured = "horovod built for tensorflow %s, runtime tensorflow %s" % (mismatch.built_for, mismatch.found)
    else:
        measured = "horovod built for another tensorflow than the one it imports: %s" % mismatch.line[:300]
    return failed(cid, measured, "Horovod built against the TensorFlow it imports",
                  remedy("HOROVOD_TF_MISMATCH"), "HOROVOD_TF_MISMATCH")


def required_for(ctx: Context) -> list[tuple[str, str]]:
    """Without a stack, the project's environment (``horovod_gate.DEFAULT_REQUIRE``); with one, the ``BASELINE`` plus
    what the stack's Horovod build flags ask for (``images.horovod.required_components``) plus NCCL's tensor
    operations on a GPU stack (the GPU allreduce of every GPU stack is NCCL's), in ``--check-build``'s order: the
    stack's list adds to the baseline, never replaces it (an empty or partial ``horovod_env`` still needs
    TensorFlow and MPI)."""
    if ctx.stack is None:
        return parse_requirements(horovod_gate.DEFAULT_REQUIRE)
    from images.horovod import required_components  # part of this tree: ImportError is ERROR, not a SKIP

    req = list(dict.fromkeys([*BASELINE, *required_components(ctx.stack.build.horovod_env)]
                             + ([("tensor_op", "NCCL")] if ctx.stack.gpu else [])))
    return sorted(req, key=lambda kn: _KINDS.index(kn[0]))


def _recorded_mismatch(ctx: Context) -> Observed | None:
    """A bundle's first recorded import of Horovod or training launch (``HOROVOD_IMPORT``) whose output says Horovod
    was built for another TensorFlow, or None (live: None)."""
    attempt = 1
    while (run := ctx.first(HOROVOD_IMPORT, attempt=attempt)) is not None:
        if run.value is not None:
            return run
        attempt += 1
    return None


def env_probe(ctx: Context) -> dict:
    def go() -> dict:
        try:
            return horovod_gate.import_probe()
        except Exception as e:  # TimeoutExpired, bad JSON: reported, never raised
            return {"error": "%s: %s" % (type(e).__name__, e)}

    return ctx.fact("horovod import probe", go)


#: Not ``fast``: the import probe starts TensorFlow and Horovod in a fresh interpreter (tens of seconds on a cold
#: file cache), as does ``horovod.controller``, which reads the same probe.
@check("horovod.env", "Horovod of this environment: frameworks, controllers, tensor ops, TF built-for", fast=False)
def env(ctx: Context) -> CheckResult:
    cid = "horovod.env"
    check_build = ctx.first(CHECK_BUILD)
    mismatch = _recorded_mismatch(ctx)
    if check_build is not None:  # a bundle's `horovodrun --check-build` (the same marks; exit status means nothing)
        result = judge_build(check_build.value, required_for(ctx), where="the recorded `%s`" % check_build.command)
        result.details.append("from the bundle's `%s`" % check_build.command)
        if result.status.value != "PASS" or mismatch is None:
            return result
    if mismatch is not None:  # a bundle's import or launch whose ranks said Horovod was built for another TF
        result = judge_tf_mismatch(mismatch.value)
        result.details += ["from the bundle's `%s`: %s" % (mismatch.command, mismatch.value.line)]
        return result
    if ctx.stack is not None and ctx.stack.family != "cpu":
        return skipped(cid, "stack %s runs Horovod inside its image (see horovod.image)" % ctx.stack.name,
                       code="NOT_APPLICABLE")
    probe = env_probe(ctx)
    mismatch = tf_mismatch(probe["error"]) if "error" in probe else None
    if mismatch is not None:
        result = judge_tf_mismatch(mismatch)
        result.details.append("import horovod.tensorflow failed: %s" % probe["error"][:600])
        return result
    if "error" in probe:
        return failed(cid, "import horovod.tensorflow failed: %s" % probe["error"][:300], "Horovod with TensorFlow",
                      "run scripts/setup (it builds Horovod against the installed TensorFlow)", "HOROVOD_IMPORT")
    build = build_from_api(probe.get("horovod"), ["TensorFlow"], probe.get("built") or {})
    return judge_build(build, required_for(ctx), probe.get("tensorflow"), probe.get("built_for"))


@check("horovod.image", "Horovod inside the stack's image (era-aware)", requires=(no_stack_image,), fast=False)
def image(ctx: Context) -> CheckResult:
    cid = "horovod.image"
    tag = stack_image(ctx)[0]
    from images.verify import MISMATCH, ProbeResult, compare, probe_image  # part of this tree: ImportError is ERROR
    from validate.checks.readings import docker_client

    probe = ProbeResult.from_json(ctx.fact("horovod probe in %s" % tag,
                                           lambda: probe_image(docker_client(), tag).to_json()))
    if probe.error is not None:
        return failed(cid, "probe in %s failed: %s" % (tag, probe.error), "the in-image probe runs",
                      "invoke build --stack %s (rebuild)" % ctx.stack.name, "IMAGE_PROBE_FAILED")
    rows = [r for r in compare(ctx.stack, probe).rows if r.row.startswith("horovod ")]
    bad = [r for r in rows if r.verdict == MISMATCH]
    summary = "; ".join("%s: %s" % (r.row, r.found) for r in rows) or "no Horovod rows"
    if bad:
        found = bad[0].found
        if bad[0].row == "horovod built for TF":
            found = "horovod built for tensorflow %s, runtime %s" % (bad[0].found, bad[0].expected.lstrip("= "))
        return failed(cid, "%s: %s" % (tag, found), bad[0].expected,
                      "rebuild: invoke build --stack %s" % ctx.stack.name, "HOROVOD_BUILD_INCOMPLETE"
                      if bad[0].row == "horovod build" else "HOROVOD_TF_MISMATCH")
    return passed(cid, "%s: %s" % (tag, summary), "the stack's Horovod build")


def judge_controller(interfaces: list[str], gloo: bool, mpi: bool) -> CheckResult:
    """The controller ``launch.controller.pick_controller`` chooses on these interfaces, against what Horovod was
    built with: Gloo needs a non-loopback interface (observed here: Horovod 0.28.1 + TensorFlow 2.15.1 in a container
    whose only interface is loopback); MPI runs over loopback."""
    cid = "horovod.controller"
    built = ", ".join(n for n, b in (("Gloo", gloo), ("MPI", mpi)) if b) or "none"
    chosen, reason = pick_controller(interfaces, None)
    if chosen == "gloo" and gloo:
        return passed(cid, "controllers %s; Gloo usable (%s)" % (built, reason), "a controller that can run here")
    if chosen == "gloo" or (mpi and not gloo):
        return passed(cid, "controllers %s; MPI runs here" % built, "a controller that can run here")
    if mpi:
        return warned(cid, "only loopback is up (%s); controllers %s" % (", ".join(interfaces) or "none", built),
                      "a non-loopback interface for Gloo", "use the MPI controller (invoke train --controller mpi, "
                      "horovodrun --mpi): Gloo ranks segfault (exit 139) with only lo; or give the container a "
                      "network (--network host)", "GLOO_LOOPBACK_ONLY")
    return failed(cid, "only loopback is up and Gloo is the only controller", "a non-loopback interface for Gloo",
                  "give the container a network (--network host) or rebuild Horovod with MPI (HOROVOD_WITH_MPI=1)",
                  "GLOO_LOOPBACK_ONLY")


@check("horovod.controller", "Horovod controller vs this node's network interfaces", fast=False)
def controller(ctx: Context) -> CheckResult:
    cid = "horovod.controller"
    probe = env_probe(ctx)
    if "error" in probe:
        return skipped(cid, "Horovod not importable here (see horovod.env)", code="NOT_APPLICABLE")
    built = probe.get("built") or {}
    names, source = interfaces(ctx)
    result = judge_controller(names, bool(built.get("gloo_built")), bool(built.get("mpi_built", True)))
    if source:
        result.details.append("interfaces from the bundle's `%s`" % source)
    return result
