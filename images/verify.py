"""Verify a built image against its stack manifest, from inside the image.

``probe_image(client, image)`` runs ``python /opt/chexstack/validate/probe.py`` in a throw-away container and
returns its JSON; ``compare(stack, probe)`` -> ``Verification`` with one ``Row`` per Table 1 row plus the Horovod
build checks; ``print_table`` shows it. Comparison rule (``envs/manifest.py``): a shorter expected version matches
a longer found one with the same leading parts ("3.11" matches "3.11.2"); a row the stack does not have
(expected ``None``) must not be found either; ``cuda_driver`` is a host property and is not judged here.

Horovod, era-aware (``images.horovod``): from 0.17 the ``horovodrun --check-build`` marks must include what the
stack's build flags require (parsed by ``validate.parsers.horovod``; its exit status means nothing,
../shared/cases/01); before 0.17 the probe's ``import horovod.tensorflow`` + ``hvd.init()`` must have worked.
Always: the TensorFlow Horovod was compiled for (``horovod/metadata.json``) must be the one imported (case 02).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import docker
import docker.errors
from rich.table import Table

from chexstack.console import console
from chexstack.errors import ChexstackError
from envs.manifest import COMPONENTS, Stack
from envs.rules import same_release
from images import horovod
from images.naming import IN_IMAGE_HOME
from validate.parsers.horovod import format_missing, parse_check_build
from validate.probe import FILES
from validate.versions import Observed, observed_versions

PROBE = "%s/validate/probe.py" % IN_IMAGE_HOME
MATCH, MISMATCH, NOT_JUDGED = "match", "MISMATCH", "n/a"


@dataclass(frozen=True)
class Row:
    row: str
    expected: str
    found: str
    evidence: str
    verdict: str


@dataclass(frozen=True)
class Verification:
    rows: list[Row]
    probe_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.probe_error is None and all(r.verdict != MISMATCH for r in self.rows)

    def mismatches(self) -> list[dict]:
        """The failing rows as JSON-able dicts (stored in the image label when ``--allow-mismatch``)."""
        return [{"row": r.row, "expected": r.expected, "found": r.found} for r in self.rows if r.verdict == MISMATCH]


def _run(client: docker.DockerClient, image: str, argv: list[str]) -> tuple[bytes | None, str | None]:
    """(stdout, None) of ``argv`` in a throw-away container of ``image``, or (None, why it failed)."""
    try:
        return client.containers.run(image, argv, remove=True, network_mode="host", stdout=True, stderr=False,
                                     environment={"TF_CPP_MIN_LOG_LEVEL": "3"}), None
    except docker.errors.ContainerError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return None, "exit %s: %s" % (e.exit_status, err[-1] if err else "no output")
    except docker.errors.APIError as e:
        return None, str(e.explanation or e)


def _release_files(client: docker.DockerClient, image: str) -> dict[str, str]:
    """The probe's release files read with ``sh`` (for an image without Python: the table still names its OS)."""
    script = 'for f in %s; do [ -f "$f" ] && printf "\\036%%s\\n" "$f" && cat "$f"; done; true' % " ".join(FILES)
    out, _ = _run(client, image, ["sh", "-c", script])
    files = {}
    for chunk in (out or b"").decode("utf-8", "replace").split("\036")[1:]:
        path, _, text = chunk.partition("\n")
        files[path] = text
    return files


def probe_image(client: docker.DockerClient, image: str) -> dict:
    """The probe's JSON from inside ``image``; when it cannot run (no python, a crash): ``{"error": why,
    "files": release files read with sh}``."""
    out, error = _run(client, image, ["python", PROBE])
    if error is None:
        try:
            return json.loads(out.decode("utf-8", "replace"))
        except ValueError:
            error = "probe printed no JSON: %s" % out[-500:]
    return {"error": error, "files": _release_files(client, image)}


def matches(expected: str, found: str) -> bool:
    """The manifest's rule: expected "3.11" matches found "3.11.2" (``envs.rules.same_release``), never the
    reverse: a found "10.1" does not prove an expected "10.1.168"."""
    try:
        return len(found.split(".")) >= len(expected.split(".")) and same_release(expected, found)
    except ChexstackError:
        return False


def _version_row(stack: Stack, row: str, obs: Observed) -> Row:
    comp = stack.components[row]
    expected = " ".join(x for x in (comp.name, comp.version) if x) if comp.version else "none"
    found = " ".join(x for x in (obs.name, obs.version) if x) if obs.version else "not found"
    evidence = obs.evidence or obs.problem or ""
    if row == "cuda_driver":
        return Row(row, "≥ %s (host)" % stack.min_driver if stack.min_driver else "host", found, evidence, NOT_JUDGED)
    if comp.version is None:
        verdict = MATCH if obs.version is None else MISMATCH
    else:
        verdict = MATCH if obs.version and matches(comp.version, obs.version) else MISMATCH
    return Row(row, expected, found, evidence, verdict)


def _horovod_rows(stack: Stack, probe: dict) -> list[Row]:
    hvd = probe.get("horovod") or {}
    version = stack.version("horovod")
    rows = []
    if version and horovod.has_check_build(version):
        required = horovod.required_components(stack.build.horovod_env)
        res = (probe.get("commands") or {}).get("horovodrun --check-build") or {}
        built = parse_check_build(res.get("out") or "")
        missing = built.missing(required) if not built.problems else required
        found = "; ".join(built.problems) if built.problems else (format_missing(missing) if missing else "all [X]")
        rows.append(Row("horovod build", ", ".join("%s=%s" % kn for kn in required), found,
                        "horovodrun --check-build", MISMATCH if missing or built.problems else MATCH))
    elif version:
        init = hvd.get("init")
        rows.append(Row("horovod build", "import + hvd.init()", "size %s" % init.get("size") if init else
                        "failed: %s" % (hvd.get("error") or "no result").splitlines()[-1][:200],
                        "probe (no --check-build before 0.17)", MATCH if init else MISMATCH))
    built_for = (hvd.get("built_for") or {}).get("tensorflow")
    tf = (probe.get("tensorflow") or {}).get("version")
    if version and built_for:
        rows.append(Row("horovod built for TF", "= TensorFlow %s" % (tf or "?"), built_for,
                        "horovod/metadata.json", MATCH if built_for == tf else MISMATCH))
    return rows


def compare(stack: Stack, probe: dict) -> Verification:
    """Judge every Table 1 row and the Horovod build of ``stack`` against a probe JSON."""
    observed = observed_versions(probe)
    rows = [_version_row(stack, row, observed[row]) for row in COMPONENTS] + _horovod_rows(stack, probe)
    return Verification(rows, probe.get("error"))


def print_table(stack: Stack, image: str, result: Verification) -> None:
    table = Table(title="verification of %s (stack %s)" % (image, stack.name), title_justify="left")
    for col in ("row", "expected", "found", "evidence", "verdict"):
        table.add_column(col, overflow="fold")
    for r in result.rows:
        style = "green" if r.verdict == MATCH else "bold red" if r.verdict == MISMATCH else "dim"
        table.add_row(r.row, r.expected, r.found, r.evidence, "[%s]%s[/]" % (style, r.verdict))
    console.print(table, width=None if console.is_terminal else 160)
    if result.probe_error:
        console.print("[bold red]the probe could not run in the image:[/] %s" % result.probe_error, soft_wrap=True)
