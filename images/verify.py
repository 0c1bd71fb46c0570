"""Verify a built image against its stack manifest, from inside the image.

``probe_image(client, image)`` runs ``python /opt/chexstack/facts/probe.py`` in a throw-away container and
returns a ``ProbeResult`` (its JSON, or why it could not run); ``compare(stack, probe)`` -> ``Verification`` with
one ``Row`` per Table 1 row plus the Horovod build checks; ``print_table`` shows it. Comparison rule
(``envs/manifest.py``): a shorter expected version matches a longer found one with the same leading parts ("3.11"
matches "3.11.2"); a row the stack does not have (expected ``None``) must not be found either;
``cuda_driver`` is a host property and is not judged here.

Horovod, era-aware (``images.horovod``): from 0.17 the ``horovodrun --check-build`` marks must include what the
stack's build flags require (parsed by ``facts.parsers.horovod``; its exit status means nothing,
https://github.com/horovod/horovod/issues/3858); before 0.17 the probe's ``import horovod.tensorflow`` + ``hvd.init()``
must have worked.
Always: the TensorFlow Horovod was compiled for (``horovod/metadata.json``) must be the one imported
(horovod/horovod#2619).

Launch requirements (``launch_report`` runs ``images.mpijob.CHECK_SCRIPT`` in a loopback-only container,
``launch_rows`` judges it): what ``launch/k8s.py``'s MPIJob, ``launch/slurm.py``'s pyxis script and every launcher
need of the image (sshd and its effective config, the ssh client's, ``mpirun``, mpirun -> ssh -> sshd -> a rank,
PMIx, the verbs userspace, ``python -m trainer``); each is a row, and a failed one fails verification.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, model_validator
from rich.table import Table

from chexstack.console import console
from chexstack.errors import ChexstackError
from envs.manifest import COMPONENTS, Stack
from envs.rules import same_release
from facts.parsers.horovod import format_missing, parse_check_build
from facts.probe import FILES
from facts.versions import Observed, observed_versions
from images import horovod, mpijob, payload
from images.naming import IN_IMAGE_HOME

PROBE = payload.PROBE
MATCH, MISMATCH, NOT_JUDGED = "match", "MISMATCH", "n/a"
#: The launch rows, in order (``launch_rows``).
LAUNCH_ROWS = ("mpijob sshd", "mpijob ssh client", "mpirun on PATH", "mpirun over ssh", "pmix (pyxis)",
               "verbs userspace", "python -m trainer")
SSHD_WANTED = "sshd -T ok, %s, PubkeyAuthentication yes, root key login, %s" % (
    ", ".join("%s %s" % kv for kv in mpijob.SSHD_OPTIONS), mpijob.PRIVSEP_DIR)
KEY_KIND = "ECDSA P-521 in a world-writable folder, as the operator mounts it"


@dataclass(frozen=True)
class Row:
    row: str
    expected: str
    found: str
    evidence: str
    verdict: str


class ProbeResult(BaseModel):
    """What running the in-image probe (``facts/probe.py``) gave: its JSON (``output``) when it ran, else why it
    could not (``error``: no python, a crash, no JSON) and the release files read with ``sh`` instead (``files``:
    path -> text, so that the table still names the OS). Exactly one of ``output`` and ``error``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    output: dict | None = None
    error: str | None = None
    files: dict[str, str] = {}

    @model_validator(mode="after")
    def _one_of(self) -> ProbeResult:
        if (self.output is None) == (self.error is None):
            raise ValueError("a probe result has either the probe's output or the error, not %s"
                             % ("both" if self.output is not None else "neither"))
        return self

    def observed(self) -> dict:
        """The probe JSON ``facts.versions.observed_versions`` reads: the output, or only the release files."""
        return self.output if self.output is not None else {"files": dict(self.files)}

    def to_json(self) -> dict:
        """The probe's JSON, or ``{"error": why, "files": {...}}`` when it could not run (what a node's evidence
        records, ``validate``'s ``ctx.fact``); ``from_json`` reads it back."""
        return self.output if self.output is not None else {"error": self.error, "files": dict(self.files)}

    @classmethod
    def from_json(cls, value: dict) -> ProbeResult:
        """The inverse of ``to_json``."""
        if "error" in value:
            return cls(error=value["error"], files=value.get("files") or {})
        return cls(output=value)


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


def _run(client: docker.DockerClient, image: str, argv: list[str], **options) -> tuple[bytes | None, str | None]:
    """(stdout, None) of ``argv`` in a throw-away container of ``image`` (network host unless ``options`` say
    otherwise), or (None, why it failed)."""
    options = {"network_mode": "host", **options}
    name = "chexstack-probe-%s" % uuid.uuid4().hex[:12]
    try:
        return client.containers.run(image, argv, remove=True, stdout=True, stderr=False, name=name,
                                     environment={"TF_CPP_MIN_LOG_LEVEL": "3"}, **options), None
    except docker.errors.ContainerError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        return None, "exit %s: %s" % (e.exit_status, err[-1] if err else "no output")
    except docker.errors.APIError as e:
        # a container that could not start (no such executable in the image) stays "Created": remove it
        try:
            client.containers.get(name).remove(force=True)
        except docker.errors.DockerException:
            pass
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


def probe_image(client: docker.DockerClient, image: str) -> ProbeResult:
    """The probe run inside ``image``; when it cannot run (no python, a crash), the error and the release files
    read with sh."""
    out, error = _run(client, image, ["python", PROBE])
    if error is None:
        try:
            return ProbeResult(output=json.loads(out.decode("utf-8", "replace")))
        except ValueError:
            error = "probe printed no JSON: %s" % out[-500:]
    return ProbeResult(error=error, files=_release_files(client, image))


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


def compare(stack: Stack, probe: ProbeResult, launch: dict | None = None) -> Verification:
    """Judge every Table 1 row and the Horovod build of ``stack`` against a probe's result (a probe that could not
    run: every row it would have shown is a MISMATCH, and ``probe_error`` says why), and, given ``launch_report``'s
    sections, the launch requirements (``launch_rows``)."""
    observed = observed_versions(probe.observed())
    rows = [_version_row(stack, row, observed[row]) for row in COMPONENTS] + _horovod_rows(stack, probe.observed())
    if launch is not None:
        rows += launch_rows(launch)
    return Verification(rows, probe.error)


def launch_report(client: docker.DockerClient, image: str) -> dict[str, tuple[str, int | None]]:
    """The sections of ``images.mpijob.CHECK_SCRIPT`` run in a throw-away container of ``image`` with only
    loopback (``--network none``: its sshd's port 22 is its own), ``mpijob.CHECK_WORKER`` naming a second loopback
    address; ``{"error": (why, None)}`` when the container could not run."""
    out, error = _run(client, image, ["sh", "-c", mpijob.CHECK_SCRIPT], network_mode="none",
                      extra_hosts={mpijob.CHECK_WORKER: mpijob.CHECK_WORKER_ADDRESS})
    if error is not None:
        return {"error": (error, None)}
    return mpijob.parse_report(out.decode("utf-8", "replace"))


def _config(text: str) -> dict[str, str]:
    """``sshd -T`` / ``ssh -G`` output -> {lower-case keyword: value} (first value of each keyword)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and value and key.isalnum():
            values.setdefault(key.lower(), value.strip())
    return values


_FLAG = {"no": "no", "false": "no", "off": "no", "yes": "yes", "true": "yes", "on": "yes"}


def _effective(options: tuple[tuple[str, str], ...], config: dict[str, str]) -> tuple[str, bool]:
    """(``keyword value, ...`` as in effect, whether each equals the wanted value; yes/true, no/false/off alike)."""
    found, ok = [], True
    for key, want in options:
        have = config.get(key.lower())
        found.append("%s %s" % (key, have if have is not None else "(not shown)"))
        ok = ok and have is not None and _FLAG.get(have.lower(), have) == _FLAG.get(want.lower(), want)
    return ", ".join(found), ok


def _tail(text: str, n: int = 2) -> str:
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return " / ".join(lines[-n:]) or "no output"


def _sshd(out: str, rc: int) -> tuple[str, bool]:
    """sshd accepts its config and host keys, its privilege separation folder exists, and the MPIJob options are
    in effect (``sshd -T``), including root login with a key."""
    if rc != 0:
        return "exit %s: %s" % (rc, _tail(out)), False
    config = _config(out)
    found, ok = _effective(mpijob.SSHD_OPTIONS + (("PubkeyAuthentication", "yes"),), config)
    root = config.get("permitrootlogin", "")
    return ("%s, PermitRootLogin %s" % (found, root or "(not shown)"),
            ok and root in ("yes", "without-password", "prohibit-password"))


def _ssh_client(out: str, rc: int) -> tuple[str, bool]:
    if rc != 0:
        return "exit %s: %s" % (rc, _tail(out)), False
    return _effective(mpijob.SSH_CLIENT_OPTIONS, _config(out))


def _row(report: dict, section: str, row: str, expected: str, evidence: str, judge) -> Row:
    """A row whose verdict is ``judge(output, exit status)`` -> (found, ok) when the section ran, else MISMATCH."""
    out, rc = report.get(section, ("", None))
    if rc is None:
        return Row(row, expected, "did not run: %s" % _tail(out), evidence, MISMATCH)
    found, ok = judge(out, rc)
    return Row(row, expected, found, evidence, MATCH if ok else MISMATCH)


def _pmix(out: str, rc: int) -> tuple[str, bool]:
    """Open MPI < 5: a ``MCA pmix:`` component of a PMIx release (pmix2x, pmix3x, ext3x, ...), not only the
    isolated/flux/s1/s2 stand-ins; Open MPI >= 5 always runs on PMIx."""
    comps = re.findall(r"MCA pmix:\s*(\S+)", out)
    real = [c for c in comps if re.match(r"^(pmix|ext)\d", c)]
    major = re.search(r"Open MPI:\s*(\d+)", out)
    if real:
        return "MCA pmix: %s" % ", ".join(real), True
    if major and int(major.group(1)) >= 5:
        return "Open MPI %s (PMIx built in)" % major.group(1), True
    if comps:
        return "no PMIx component (MCA pmix: %s)" % ", ".join(comps), False
    return (_tail(out) if "not found" in out else "no MCA pmix component (%s)" % _tail(out)), False


def _verbs(out: str, rc: int) -> tuple[str, bool]:
    """``libibverbs.so.1`` in the loader cache and provider drivers (``/etc/libibverbs.d/*.driver``); Mellanox's
    (mlx4, mlx5) are named when present."""
    lib = re.search(r"libibverbs\.so\.1 .*=> (\S+)", out)
    providers = sorted(re.findall(r"^(\S+)\.driver$", out, re.M))
    shown = [p for p in providers if p.startswith("mlx")] or providers[:3]
    found = "%s; %s" % (lib.group(1) if lib else "libibverbs.so.1 not found",
                        "%d providers (%s%s)" % (len(providers), ", ".join(shown),
                                                 ", ..." if len(shown) < len(providers) else "")
                        if providers else "no provider in /etc/libibverbs.d")
    return found, bool(lib and providers)


def _on_path(out: str, rc: int) -> tuple[str, bool]:
    return out.strip() or "not found", rc == 0 and bool(out.strip())


def _over_ssh(out: str, rc: int) -> tuple[str, bool]:
    """The rank prints its ``SSH_CONNECTION``: set only when its daemon was started by sshd."""
    ok = rc == 0 and re.search(r"^rank 0 of 1, ssh \S", out, re.M) is not None
    return (_tail(out, 1) if ok else "exit %s: %s" % (rc, _tail(out, 4))), ok


def _runs(out: str, rc: int) -> tuple[str, bool]:
    return (_tail(out, 1) if rc == 0 else "exit %s: %s" % (rc, _tail(out, 3))), rc == 0


def launch_rows(report: dict[str, tuple[str, int | None]]) -> list[Row]:
    """One row per launch requirement (``LAUNCH_ROWS``), judged from ``launch_report``'s sections."""
    if "error" in report:
        why = "check could not run: %s" % report["error"][0]
        return [Row(row, "see images/mpijob.py", why, "launch check", MISMATCH) for row in LAUNCH_ROWS]
    sshd, client, on_path, over_ssh, pmix, verbs, trainer = LAUNCH_ROWS
    ssh_client = ", ".join("%s %s" % kv for kv in mpijob.SSH_CLIENT_OPTIONS)
    return [
        _row(report, "sshd", sshd, SSHD_WANTED, "%s -T; %s" % (mpijob.SSHD, mpijob.PRIVSEP_DIR), _sshd),
        _row(report, "ssh-client", client, ssh_client, "ssh -G %s" % mpijob.CHECK_WORKER, _ssh_client),
        _row(report, "mpirun", on_path, "mpirun", "command -v mpirun", _on_path),
        _row(report, "ssh-mpirun", over_ssh, "a rank started through sshd (%s)" % KEY_KIND,
             "mpirun -H %s:1 (%s)" % (mpijob.CHECK_WORKER, mpijob.CHECK_WORKER_ADDRESS), _over_ssh),
        _row(report, "pmix", pmix, "Open MPI with a PMIx component", "ompi_info", _pmix),
        _row(report, "verbs", verbs, "libibverbs.so.1 + a provider", "ldconfig -p; /etc/libibverbs.d", _verbs),
        _row(report, "trainer", trainer, "runs from %s" % IN_IMAGE_HOME, "python -m trainer --help", _runs),
    ]


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
