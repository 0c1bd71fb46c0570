"""A signed statement per result, and its offline check (``invoke verify-run DIR``).

When a run ends (``invoke train`` here or in a stack's image; each count of ``invoke bench``), chexstack writes
``OUTPUT/chexstack.intoto.jsonl`` (a sweep: ``X.intoto.jsonl`` beside its ``X.json``, out of ``*.json`` globs): an
in-toto bundle (https://github.com/in-toto/attestation/blob/main/spec/v1/bundle.md: one DSSE envelope per line,
here one) holding an in-toto Statement v1
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md, built with the ``in-toto-attestation``
package) in a DSSE envelope (https://github.com/secure-systems-lab/dsse/blob/master/envelope.md, signed with
``securesystemslib``'s ``CryptoSigner``), payload type ``application/vnd.in-toto+json``.

- subjects: the result files (``SUBJECTS`` present in the folder), each by SHA-256;
- predicate type ``PREDICATE_TYPE``; predicate: ``stack`` with its manifest's and conda lock's SHA-256, ``image``
  (a Docker reference and image ID, or a SIF's path, SHA-256 and the fingerprint of the key that signs SIFs),
  ``git`` (commit, dirty), ``launch_plan`` (the rendered command line and its SHA-256), ``command`` (chexstack's own
  command line), ``as_run`` (``trainer.asrun``, per rank) and ``drift`` (``launch.drift``), ``started``/``finished``
  (UTC, ISO 8601); ``jobs``: the scheduler's jobs that ran it (``job_block``: the scheduler, the rendered batch
  script's or MPIJob's SHA-256, the job id; empty for a run from here); ``validation``: each judged host's validate
  verdict and its evidence bundle's SHA-256 where one was taken (``validation_block``; empty when none was).

Where a statement is written: at the end of a run from here and of a Slurm job followed from here (``invoke train
--launcher slurm --submit``); a sweep's at its end here, or for a scheduled sweep when ``invoke bench --collect``
gathers its results (the job is not followed: its id and script were kept beside its results at submission,
``JOB_FILE``); a study's at its end. A detached Slurm job and a Kubernetes submission are not followed from here:
no statement (``unsigned_note`` says so).

The key is the project's signing key, the one that signs SIFs (``images.sif.signing_key``: ECDSA P-256 PEM,
``CHEXSTACK_SIF_KEY`` overrides); the signature's ``keyid`` is the SHA-256 of the public key's DER
SubjectPublicKeyInfo (``fingerprint``).

``verify`` returns a ``Verdict``: exit 0 verified; 1 a mismatch, named (a subject's file, a predicate field, the
signature, drift unless allowed); 2 cannot verify (no statement, a key that is not the one given).
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from chexstack.errors import ChexstackError, ExitCode

STATEMENT = "chexstack.intoto.jsonl"
#: The predicate's type: a chexstack run, version 1 (this module's docstring is its specification).
PREDICATE_TYPE = "https://chexstack.dev/run/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
#: The result files a statement names where they exist: a training run's and a throughput count's (the names of
#: trainer/outputs.py, which the host does not import) and the launcher's log.
SUBJECTS = ("metrics.json", "predictions.csv", "test-predictions.csv", "splits.csv", "model.h5", "model-best.h5",
            "throughput.json", "horovod-timeline.json", "skipped-images.csv", "launch.log")
#: What a scheduled sweep's submission keeps beside its results (``keep_job``): the job's block, for ``--collect``.
JOB_FILE = "job.json"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fingerprint(public_pem: bytes) -> str:
    """SHA-256 (hex) of the DER SubjectPublicKeyInfo of a PEM public key."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_public_key(public_pem)
    return hashlib.sha256(key.public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest()


def subjects(folder: Path, names: tuple[str, ...] = SUBJECTS) -> list[Path]:
    """The result files of ``folder`` among ``names``, in that order (the ones present)."""
    return [folder / n for n in names if (folder / n).is_file()]


def statement(files: list[Path], folder: Path, predicate: dict) -> dict:
    """The in-toto Statement v1 (a dict) of ``files`` (named relative to ``folder``) with ``predicate``;
    validated by ``in_toto_attestation``."""
    from google.protobuf import json_format
    from in_toto_attestation.v1 import resource_descriptor
    from in_toto_attestation.v1 import statement as v1

    subs = [resource_descriptor.ResourceDescriptor(name=str(p.relative_to(folder)),
                                                   digest={"sha256": sha256_file(p)}).pb for p in files]
    stmt = v1.Statement(subs, PREDICATE_TYPE, json.loads(json.dumps(predicate)))
    stmt.validate()
    return json_format.MessageToDict(stmt.pb)


def sign(stmt: dict, key: Path) -> dict:
    """The DSSE envelope (a dict) of ``stmt`` signed with the PEM private key at ``key`` (its public half beside it,
    ``images.sif.public_key``)."""
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner, SSlibKey

    from images.sif import public_key

    private = serialization.load_pem_private_key(key.read_bytes(), password=None)
    public = SSlibKey.from_crypto(private.public_key(), keyid=fingerprint(public_key(key).read_bytes()))
    envelope = Envelope(json.dumps(stmt, sort_keys=True).encode(), PAYLOAD_TYPE, {})
    envelope.sign(CryptoSigner(private, public))
    return envelope.to_dict()


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader sees the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write(folder: Path, predicate: dict, key: str | Path | None = None, names: tuple[str, ...] = SUBJECTS,
          path: Path | None = None) -> Path:
    """Sign the statement of ``folder``'s result files (``names`` present there) and write it as ``path``
    (default ``folder/STATEMENT``); its path."""
    from images.sif import signing_key

    path = path or folder / STATEMENT
    try:
        envelope = sign(statement(subjects(folder, names), folder, predicate), signing_key(key))
        _replace(path, json.dumps(envelope) + "\n")
    except OSError as e:  # the key cannot be made or read, the folder cannot be written: no unsigned result
        raise ChexstackError("the result's signed statement %s cannot be written: %s" % (path, e),
                             exit_code=ExitCode.FAILED) from None
    return path


def sweep_statement_path(sweep_json: Path) -> Path:
    """Where a sweep JSON's statement goes: ``X.json`` -> ``X.intoto.jsonl`` beside it."""
    return sweep_json.with_name(sweep_json.stem + ".intoto.jsonl")


def write_collection(folder: Path, names: list[str], *, stack: str | None, image: dict | None, drift: list[str],
                     started: str, kind: str, path: Path | None = None, jobs: list[dict] = (),
                     validation: list[dict] = ()) -> Path:
    """The statement of a sweep (its JSON) or a study (its folder's files): ``kind`` "sweep" or "study", the counts'
    drift carried (their run records: ``bench.results.RunRecord.drift``); the launch plan is chexstack's command
    line (each count's own is in its run folder's statement); ``jobs``: the scheduler's jobs that ran the counts."""
    line = shlex.join(sys.argv)
    return write(folder, predicate(stack=stack, image=image, plan_line=line, as_run=None, drift=drift,
                                   started=started, finished=now(), kind=kind, jobs=jobs, validation=validation),
                 names=tuple(names), path=path)


#: The signer's public key as a study keeps it beside its statement (``keep_public_key``): a committed figure's
#: statement is verified with it (``invoke verify-run DIR --key DIR/signer.pub.pem``) after its fingerprint, the
#: statement's ``keyid``, is compared with the key the reader trusts.
SIGNER = "signer.pub.pem"


def keep_public_key(folder: Path, key: str | Path | None = None) -> Path:
    """Copy the public half of the signing key (``images.sif.signing_key``) to ``folder/SIGNER``."""
    from images.sif import public_key, signing_key

    path = folder / SIGNER
    _replace(path, public_key(signing_key(key)).read_text())
    return path


def job_block(scheduler: str, artifact: str, text: str, job_id: str | None) -> dict:
    """{"scheduler", "artifact", "sha256", "id"}: a job as the scheduler ran it (``scheduler``: the table's name,
    ``launch.schedulers.SCHEDULERS``; ``artifact``: what ``text`` is, a batch script or an MPIJob; ``job_id``: Slurm's
    job id, the MPIJob's name; None when unknown)."""
    return {"scheduler": scheduler, "artifact": artifact, "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "id": job_id}


def keep_job(folder: Path, block: dict) -> Path:
    """Write ``block`` (``job_block``) as ``folder/JOB_FILE``, for the statement ``--collect`` writes later."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / JOB_FILE
    _replace(path, json.dumps(block, indent=2) + "\n")
    return path


def kept_job(folder: Path) -> dict | None:
    """The job block ``keep_job`` kept in ``folder``; None where there is none (a sweep submitted before it was
    kept, or a Kubernetes sweep's claim, which this machine does not see at submission)."""
    path = folder / JOB_FILE
    try:
        block = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ChexstackError("%s: cannot read the job's record (%s)" % (path, e)) from None
    if not isinstance(block, dict) or not {"scheduler", "sha256", "id"} <= set(block):
        raise ChexstackError("%s: expected the job's scheduler, sha256 and id (written at submission)" % path)
    return block


def tree_sha256(folder: Path) -> str:
    """SHA-256 of a folder's files: of the sorted lines ``<relative path>  <file's SHA-256>`` (sha256sum's format),
    one per file below ``folder``. ChexstackError when it is not a folder."""
    if not folder.is_dir():
        raise ChexstackError("%s: not a folder (expected an evidence bundle of invoke validate --collect)" % folder)
    lines = sorted("%s  %s\n" % (sha256_file(p), p.relative_to(folder).as_posix())
                   for p in folder.rglob("*") if p.is_file())
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def validation_block(host: str, verdict: str, exit_code: int, summary: dict, evidence: Path | None) -> dict:
    """{"host", "verdict", "exit_code", "summary", "evidence", "evidence_sha256"}: one host's ``invoke validate``
    verdict (``validate.verdict.verdict_word``), its report's counts per status, and its bundle's folder and
    ``tree_sha256`` (None when no bundle was taken)."""
    return {"host": host, "verdict": verdict, "exit_code": exit_code, "summary": summary,
            "evidence": str(evidence.resolve()) if evidence else None,
            "evidence_sha256": tree_sha256(evidence) if evidence else None}


def unsigned_note(why: str) -> str:
    """The line said where a result gets no statement, and why (a job not followed from here)."""
    return "no signed statement: %s; invoke verify-run needs one (follow the job: leave out --detach)" % why


def git() -> dict:
    from facts.host import git_state

    commit, dirty = git_state(Path(__file__).resolve().parent.parent)
    return {"commit": commit, "dirty": dirty}


def stack_block(stack: str | None) -> dict | None:
    """{"name", "manifest", "manifest_sha256", "lock", "lock_sha256"} of a stack (the lock where it has one)."""
    if not stack:
        return None
    from envs.lock import conda_files
    from envs.manifest import STACKS_DIR

    manifest = STACKS_DIR / ("%s.yaml" % stack)
    block = {"name": stack, "manifest": str(manifest), "manifest_sha256": sha256_file(manifest),
             "lock": None, "lock_sha256": None}
    try:
        lock = conda_files(stack).lockfile
    except ChexstackError:  # a stack without a conda environment: no lock
        lock = None
    if lock is not None and lock.is_file():
        block["lock"], block["lock_sha256"] = str(lock), sha256_file(lock)
    return block


def predicate(*, stack: str | None, image: dict | None, plan_line: str, as_run: list | None, drift: list[str],
              started: str, finished: str, kind: str, jobs: list[dict] = (), validation: list[dict] = ()) -> dict:
    """The predicate (``PREDICATE_TYPE``) of one result; ``kind``: "train", "throughput", "sweep" or "study";
    ``jobs``: ``job_block``s; ``validation``: ``validation_block``s."""
    return {"kind": kind, "stack": stack_block(stack), "image": image, "git": git(),
            "launch_plan": {"command_line": plan_line,
                            "sha256": hashlib.sha256(plan_line.encode()).hexdigest()},
            "command": shlex.join(sys.argv), "as_run": as_run, "drift": drift,
            "jobs": list(jobs), "validation": list(validation),
            "started": started, "finished": finished}


def sif_block(sif: str | Path, key: str | Path | None = None) -> dict:
    """{"runtime": "singularity", "sif", "sif_sha256", "key_fingerprint"} of a SIF (the key that signs SIFs)."""
    from images.sif import public_key, signing_key

    block = {"runtime": "singularity", "sif": str(Path(sif).resolve()), "sif_sha256": None, "key_fingerprint": None}
    if Path(sif).is_file():
        block["sif_sha256"] = sha256_file(Path(sif))
    block["key_fingerprint"] = fingerprint(public_key(signing_key(key)).read_bytes())
    return block


# --- verification ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Verdict:
    """``code``: 0 verified, 1 mismatch, 2 cannot verify; ``problems``: each named; ``shown``: what the result was
    produced from (lines); ``drift``: the statement's drift lines."""

    code: int
    problems: list[str]
    shown: list[str]
    drift: list[str]
    #: the subjects' names (relative to the statement's folder)
    subjects: list[str] = dataclasses.field(default_factory=list)


def _cannot(message: str) -> Verdict:
    return Verdict(ExitCode.USAGE, [message], [], [])


def produced_from(pred: dict) -> list[str]:
    """What the result was produced from, one line each."""
    stack, image, git_ = pred.get("stack") or {}, pred.get("image") or {}, pred.get("git") or {}
    lines = ["stack: %s" % (("%s (manifest sha256 %s, lock %s)" % (stack["name"], stack["manifest_sha256"][:12],
                                                                    (stack.get("lock_sha256") or "none")[:12]))
                            if stack else "none (this machine's environment)")]
    if image:
        lines.append("image: %s" % ", ".join("%s %s" % (k, v) for k, v in image.items() if v is not None))
    lines.append("git: %s%s" % (git_.get("commit"), " (dirty)" if git_.get("dirty") else ""))
    lines.append("launch: %s" % (pred.get("launch_plan") or {}).get("command_line"))
    lines.append("command: %s" % pred.get("command"))
    for job in pred.get("jobs") or []:
        lines.append("job: %s %s (%s sha256 %s)" % (job.get("scheduler"), job.get("id") or "(id unknown)",
                                                  job.get("artifact") or "job", (job.get("sha256") or "")[:12]))
    for judged in pred.get("validation") or []:
        lines.append("validate: %s %s (exit %d; evidence %s)" % (  # protobuf's Struct holds numbers as floats
            judged.get("host"), judged.get("verdict"), int(judged.get("exit_code") or 0),
            "%s sha256 %s" % (judged["evidence"], judged["evidence_sha256"][:12]) if judged.get("evidence_sha256")
            else "none taken"))
    ranks = pred.get("as_run") or []
    if ranks:
        first = ranks[0]
        lines.append("as run (%d rank%s): %s" % (len(ranks), "" if len(ranks) == 1 else "s", ", ".join(
            "%s %s" % (k, first[k]) for k in ("python", "tensorflow", "horovod", "openmpi", "mpi", "cuda", "cudnn",
                                              "nccl") if first.get(k))))
    lines.append("time: %s to %s" % (pred.get("started"), pred.get("finished")))
    return lines


def _load_key(key: str | Path | None) -> tuple[object, str] | None:
    from cryptography.hazmat.primitives import serialization
    from securesystemslib.signer import SSlibKey

    from images.sif import DEFAULT_KEY, KEY_ENV, public_key

    path = Path(key) if key else public_key(Path(os.environ.get(KEY_ENV) or DEFAULT_KEY))
    if not path.is_file():
        return None
    pem = path.read_bytes()
    if b"PRIVATE KEY" in pem:  # the signing key itself given: its public half
        pem = serialization.load_pem_private_key(pem, password=None).public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    keyid = fingerprint(pem)
    return SSlibKey.from_crypto(serialization.load_pem_public_key(pem), keyid=keyid), str(path)


def verify(folder: str | Path, key: str | Path | None = None, allow_drift: bool = False) -> Verdict:
    """Check ``folder/STATEMENT`` (or the statement file ``folder`` names): the signature against ``key`` (a PEM
    public key; default the project's, beside ``images.sif.signing_key``'s path), every subject's SHA-256, the SIF's
    where it is at hand, and drift (a mismatch unless ``allow_drift``)."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    folder = Path(folder)
    path = folder / STATEMENT
    if folder.is_file():  # a statement named itself (a sweep's X.intoto.jsonl)
        folder, path = folder.parent, folder
    if not path.is_file():
        return _cannot("%s: no statement (%s) to verify" % (folder, STATEMENT))
    loaded = _load_key(key)
    if loaded is None:
        return _cannot("no public key to verify with: %s does not exist (give --key PEM)"
                       % (key or "the project's signing key"))
    public, key_path = loaded
    try:
        envelope = Envelope.from_dict(json.loads(path.read_text().strip().splitlines()[0]))
    except (ValueError, KeyError, TypeError, IndexError) as e:
        return Verdict(ExitCode.FAILED, ["%s: not a DSSE envelope (%s)" % (path, e)], [], [])
    keyids = [s.keyid for s in envelope.signatures.values()]
    if public.keyid not in keyids:
        return _cannot("%s: signed by key %s, not by %s (%s)" % (path, ", ".join(keyids) or "none",
                                                               public.keyid, key_path))
    try:
        envelope.verify([public], 1)
    except VerificationError:
        return Verdict(ExitCode.FAILED, ["%s: the signature does not match its payload (signature, key %s)"
                                         % (path, public.keyid)], [], [])
    if envelope.payload_type != PAYLOAD_TYPE:
        return Verdict(ExitCode.FAILED, ["%s: payloadType %s, expected %s" % (path, envelope.payload_type,
                                                                             PAYLOAD_TYPE)], [], [])
    stmt = json.loads(envelope.payload)
    problems = []
    if stmt.get("predicateType") != PREDICATE_TYPE:
        problems.append("predicateType: %s, expected %s" % (stmt.get("predicateType"), PREDICATE_TYPE))
    for sub in stmt.get("subject", []):
        target = folder / sub["name"]
        if not target.is_file():
            problems.append("%s: a subject, missing" % target)
        elif sha256_file(target) != sub["digest"]["sha256"]:
            problems.append("%s: SHA-256 %s, the statement says %s" % (target, sha256_file(target),
                                                                      sub["digest"]["sha256"]))
    pred = stmt.get("predicate") or {}
    image = pred.get("image") or {}
    if image.get("sif") and image.get("sif_sha256") and Path(image["sif"]).is_file():
        found = sha256_file(Path(image["sif"]))
        if found != image["sif_sha256"]:
            problems.append("image.sif_sha256: %s has SHA-256 %s, the statement says %s"
                            % (image["sif"], found, image["sif_sha256"]))
    for i, judged in enumerate(pred.get("validation") or []):
        evidence = judged.get("evidence")
        if evidence and judged.get("evidence_sha256") and Path(evidence).is_dir():
            found = tree_sha256(Path(evidence))
            if found != judged["evidence_sha256"]:
                problems.append("validation[%d].evidence_sha256: %s (host %s) has SHA-256 %s, the statement says %s"
                                % (i, evidence, judged.get("host"), found, judged["evidence_sha256"]))
    drift = list(pred.get("drift") or [])
    if drift and not allow_drift:
        problems.append("drift: the run's environment drifted (%d difference%s)"
                        % (len(drift), "" if len(drift) == 1 else "s"))
    return Verdict(ExitCode.FAILED if problems else ExitCode.OK, problems, produced_from(pred), drift,
                   [sub.get("name") for sub in stmt.get("subject", [])])


def statement_of(result: Path) -> Path | None:
    """The statement that names the result file ``result`` (a sweep JSON): its own ``X.intoto.jsonl``
    (``sweep_statement_path``), else its folder's ``STATEMENT`` (a study's folder, a collected sweep's results);
    None when neither exists."""
    for path in (sweep_statement_path(result), result.parent / STATEMENT):
        if path.is_file():
            return path
    return None


def verify_result(result: str | Path, key: str | Path | None = None) -> list[str]:
    """The failing checks of the statement of the result file ``result`` (``statement_of``), each naming the file:
    none when its statement verifies (``verify``; drift is ``bench-report --strict``'s to judge, not a failure
    here) and names ``result`` among its subjects; a missing statement is one."""
    result = Path(result)
    path = statement_of(result)
    if path is None:
        return ["%s: no signed statement (%s or %s beside it)" % (result, sweep_statement_path(result).name,
                                                                   STATEMENT)]
    verdict = verify(path, key, allow_drift=True)
    problems = ["%s: %s" % (result, p) for p in verdict.problems]
    if verdict.code == ExitCode.OK and result.name not in verdict.subjects:
        problems.append("%s: not a subject of its statement %s" % (result, path))
    return problems


def payload(envelope: dict) -> dict:
    """The statement inside a DSSE envelope dict (its base64 payload decoded), unchecked."""
    return json.loads(base64.b64decode(envelope["payload"]))


# --- the end of a run -------------------------------------------------------------------------------------------

def record_path(output: str | Path, throughput: bool) -> Path:
    return Path(output) / ("throughput.json" if throughput else "metrics.json")


def finish_run(output: str | Path, *, throughput: bool, stack: str | None, image: dict | None, plan_line: str,
               started: str, jobs: list[dict] = (), validation: list[dict] = (),
               also: tuple[str, ...] = ()) -> tuple[list[str], Path]:
    """After a run from here or a Slurm job followed from here: compare its ranks' as-run facts (``launch.drift``),
    write ``drift`` into its run record (metrics.json's ``run.drift``, throughput.json's ``drift``), then sign the
    statement of its result files (``SUBJECTS`` and ``also``: a job's script and log). Returns (the drift lines,
    the statement's path). ChexstackError naming the record when it cannot be read."""
    from envs.manifest import load_stack
    from launch.drift import drift

    path = record_path(output, throughput)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ChexstackError("the run ended but %s cannot be read: %s" % (path, e)) from None
    block = record if throughput else record.setdefault("run", {})
    found = drift(block.get("as_run"), load_stack(stack) if stack else None)
    block["drift"] = found
    _replace(path, json.dumps(record, indent=2) + "\n")
    written = write(Path(output), predicate(stack=stack, image=image, plan_line=plan_line,
                                            as_run=block.get("as_run"), drift=found, started=started,
                                            finished=now(), kind="throughput" if throughput else "train",
                                            jobs=jobs, validation=validation), names=SUBJECTS + tuple(also))
    return found, written
